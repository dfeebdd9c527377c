/* SPDX-License-Identifier: BSD-3-Clause
 * squall-mgr configuration: the YAML file, parsed into struct sq_config.
 *
 * Every error names file, line and field ("demo.yaml:14: chains[0].services[1]:
 * unknown service \"nat\""). A field is written as a base ("services[0]") and a
 * key ("mode"); either may be empty. This file is also linked into unit tests
 * without any DPDK library, so it uses DPDK headers only.
 */
#include <assert.h> /* squall/region.h uses static_assert without it */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include <rte_mbuf_core.h>

#include <squall/region.h>

#include "config.h"

#define REQ(key) (1ull << (key)) /* (services have more than 32 keys) */

struct ctx {
	/* each service's to_services, resolved once every service is known */
	const yaml_node_t *to_services[SQ_MAX_SERVICES];
	const char *path;    /* the config file, as given */
	const char *nf_path; /* colon-separated dirs searched before $PATH */
	yaml_document_t *doc;
	struct sq_config *cfg;
	char *err;
	size_t err_len;
	char got[96];                    /* scratch for describe() */
	const yaml_node_t *max_nfs_node; /* for an error found after the services */
};

/* Fill err with "FILE:LINE: BASE.KEY: message". Returns -EINVAL. */
static int
vfail(struct ctx *c, size_t line, const char *base, const char *key, const char *fmt, va_list ap)
{
	size_t len;

	if (c->err == NULL || c->err_len == 0)
		return -EINVAL;
	snprintf(c->err, c->err_len, "%s:%zu: ", c->path, line);
	len = strlen(c->err);
	if (base[0] != '\0' || key != NULL) {
		snprintf(c->err + len, c->err_len - len, "%s%s%s: ", base,
			 base[0] != '\0' && key != NULL ? "." : "", key != NULL ? key : "");
		len = strlen(c->err);
	}
	vsnprintf(c->err + len, c->err_len - len, fmt, ap);
	return -EINVAL;
}

static int __attribute__((format(printf, 5, 6)))
fail_line(struct ctx *c, size_t line, const char *base, const char *key, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(c, line, base, key, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int __attribute__((format(printf, 5, 6)))
fail(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, const char *fmt,
     ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(c, node->start_mark.line + 1, base, key, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int
fail_nomem(struct ctx *c, const yaml_node_t *node, const char *base, const char *key)
{
	fail(c, node, base, key, "out of memory");
	return -ENOMEM;
}

static int
node_line(const yaml_node_t *node)
{
	return (int)node->start_mark.line + 1;
}

static yaml_node_t *
seq_item(const struct ctx *c, const yaml_node_t *seq, unsigned int i)
{
	return yaml_document_get_node(c->doc, seq->data.sequence.items.start[i]);
}

/* The text of a scalar node; NULL if it is not a scalar or holds a NUL byte. */
static const char *
scalar_text(const yaml_node_t *node)
{
	const char *s;

	if (node == NULL || node->type != YAML_SCALAR_NODE)
		return NULL;
	s = (const char *)node->data.scalar.value;
	if (strlen(s) != node->data.scalar.length)
		return NULL;
	return s;
}

/* What a node is, for "expected X, got ...": a quoted scalar or its kind. */
static const char *
describe(struct ctx *c, const yaml_node_t *node)
{
	const char *s;

	switch (node->type) {
	case YAML_MAPPING_NODE: return "a mapping";
	case YAML_SEQUENCE_NODE: return "a sequence";
	case YAML_SCALAR_NODE:
		s = (const char *)node->data.scalar.value;
		if (s[0] == '\0' && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
			return "nothing";
		snprintf(c->got, sizeof(c->got), "\"%.64s%s\"", s, strlen(s) > 64 ? "..." : "");
		return c->got;
	default: return "nothing";
	}
}

/* Decimal only: an optional '-' then digits, nothing before or after. */
static bool
parse_dec(const char *s, long long *out)
{
	char *end;
	long long v = 0;

	if (!isdigit((unsigned char)s[s[0] == '-']))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

static bool
int_is_ok(const yaml_node_t *node, long long min, long long max, long long *out)
{
	const char *s = scalar_text(node);

	return s != NULL && parse_dec(s, out) && *out >= min && *out <= max;
}

static int
get_int(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, long long min,
	long long max, long long *out)
{
	if (!int_is_ok(node, min, max, out))
		return fail(c, node, base, key, "expected an integer from %lld to %lld, got %s",
			    min, max, describe(c, node));
	return 0;
}

/* The typed getters leave *out alone (the default) when the key is absent. */
static int
get_u32(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, uint32_t min,
	uint32_t max, uint32_t *out)
{
	long long v = 0;
	int ret;

	if (node == NULL)
		return 0;
	ret = get_int(c, node, base, key, min, max, &v);
	if (ret == 0)
		*out = (uint32_t)v;
	return ret;
}

static int
get_u16(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, uint16_t min,
	uint16_t max, uint16_t *out)
{
	long long v = 0;
	int ret;

	if (node == NULL)
		return 0;
	ret = get_int(c, node, base, key, min, max, &v);
	if (ret == 0)
		*out = (uint16_t)v;
	return ret;
}

static int
get_i32(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, int32_t min,
	int32_t max, int32_t *out)
{
	long long v = 0;
	int ret;

	if (node == NULL)
		return 0;
	ret = get_int(c, node, base, key, min, max, &v);
	if (ret == 0)
		*out = (int32_t)v;
	return ret;
}

static int
get_pow2_u32(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	     uint32_t min, uint32_t max, uint32_t *out)
{
	long long v = 0;

	if (node == NULL)
		return 0;
	if (!int_is_ok(node, min, max, &v) || (v & (v - 1)) != 0)
		return fail(c, node, base, key, "expected a power of two from %u to %u, got %s",
			    min, max, describe(c, node));
	*out = (uint32_t)v;
	return 0;
}

static bool
name_is_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return i >= 1 && i < SQ_CFG_NAME_LEN;
}

static int
get_name(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	 char out[SQ_CFG_NAME_LEN])
{
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	if (s == NULL || !name_is_ok(s))
		return fail(c, node, base, key,
			    "expected a name of 1 to %d characters from [A-Za-z0-9_-], got %s",
			    SQ_CFG_NAME_LEN - 1, describe(c, node));
	strcpy(out, s);
	return 0;
}

static int
get_str(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, char *out,
	size_t len)
{
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	if (s == NULL || s[0] == '\0' || strlen(s) >= len)
		return fail(c, node, base, key,
			    "expected a non-empty string of at most %zu characters, got %s",
			    len - 1, describe(c, node));
	strcpy(out, s);
	return 0;
}

static int
hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Exactly "xx:xx:xx:xx:xx:xx", hex digits in either case. */
static bool
parse_mac(const char *s, struct rte_ether_addr *mac)
{
	int i, hi, lo;

	if (strlen(s) != 17)
		return false;
	for (i = 0; i < RTE_ETHER_ADDR_LEN; i++, s += 3) {
		hi = hex_digit(s[0]);
		lo = hex_digit(s[1]);
		if (hi < 0 || lo < 0 || (i < RTE_ETHER_ADDR_LEN - 1 && s[2] != ':'))
			return false;
		mac->addr_bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static int
get_mac(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	struct rte_ether_addr *mac, bool *has_mac)
{
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	if (s == NULL || !parse_mac(s, mac))
		return fail(c, node, base, key,
			    "expected a MAC address like \"02:00:00:00:00:01\", got %s",
			    describe(c, node));
	*has_mac = true;
	return 0;
}

static int
get_mode(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, uint32_t *mode)
{
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	if (s != NULL && strcmp(s, "sleep") == 0)
		*mode = SQ_NF_MODE_SLEEP;
	else if (s != NULL && strcmp(s, "poll") == 0)
		*mode = SQ_NF_MODE_POLL;
	else
		return fail(c, node, base, key, "expected \"sleep\" or \"poll\", got %s",
			    describe(c, node));
	return 0;
}

static int
get_policy(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	   uint32_t *policy)
{
	static const char *const names[] = {
		[SQ_WAKE_MIN] = "min", [SQ_WAKE_FIXED] = "fixed", [SQ_WAKE_ADAPTIVE] = "adaptive"};
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	for (uint32_t i = 0; s != NULL && i < RTE_DIM(names); i++) {
		if (strcmp(s, names[i]) == 0) {
			*policy = i;
			return 0;
		}
	}
	return fail(c, node, base, key, "expected \"min\", \"fixed\" or \"adaptive\", got %s",
		    describe(c, node));
}

typedef int (*index_fn)(const struct sq_config *cfg, const char *name);

/* A reference by name to a port/service/chain defined earlier in the file. */
static int
get_ref(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, const char *what,
	index_fn find, int *idx)
{
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	if (s == NULL)
		return fail(c, node, base, key, "expected a %s name, got %s", what,
			    describe(c, node));
	*idx = find(c->cfg, s);
	if (*idx < 0)
		return fail(c, node, base, key, "unknown %s \"%s\"", what, s);
	return 0;
}

/* A sequence of min..max entries; *n is its length. */
static int
get_seq(struct ctx *c, const yaml_node_t *node, const char *base, const char *key, unsigned int min,
	unsigned int max, unsigned int *n)
{
	if (node->type != YAML_SEQUENCE_NODE)
		return fail(c, node, base, key, "expected a sequence of %u to %u entries, got %s",
			    min, max, describe(c, node));
	*n = node->data.sequence.items.top - node->data.sequence.items.start;
	if (*n < min || *n > max)
		return fail(c, node, base, key, "expected %u to %u entries, got %u", min, max, *n);
	return 0;
}

/*
 * Check that @p map is a mapping whose keys are all in @p keys, each at most
 * once, with every key in the @p required mask; vals[i] is the value of
 * keys[i], NULL if absent.
 */
static int
map_get(struct ctx *c, const yaml_node_t *map, const char *base, const char *const keys[],
	unsigned int n_keys, uint64_t required, yaml_node_t *vals[])
{
	const yaml_node_pair_t *pair;
	const yaml_node_t *key;
	const char *name;
	unsigned int i;

	memset(vals, 0, n_keys * sizeof(vals[0]));
	if (map->type != YAML_MAPPING_NODE)
		return fail(c, map, base, NULL, "expected a mapping, got %s", describe(c, map));
	for (pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
		key = yaml_document_get_node(c->doc, pair->key);
		name = scalar_text(key);
		if (name == NULL)
			return fail(c, key, base, NULL, "expected a key name, got %s",
				    describe(c, key));
		for (i = 0; i < n_keys && strcmp(name, keys[i]) != 0; i++)
			;
		if (i == n_keys)
			return fail(c, key, base, name, "unknown key");
		if (vals[i] != NULL)
			return fail(c, key, base, name, "duplicate key");
		vals[i] = yaml_document_get_node(c->doc, pair->value);
	}
	for (i = 0; i < n_keys; i++)
		if ((required & REQ(i)) != 0 && vals[i] == NULL)
			return fail(c, map, base, NULL, "missing required key \"%s\"", keys[i]);
	return 0;
}

/* 0 for an executable regular file, -EACCES for another file, -ENOENT for none. */
static int
exec_probe(const char *file)
{
	struct stat st;

	if (stat(file, &st) < 0)
		return -ENOENT;
	if (!S_ISREG(st.st_mode) || access(file, X_OK) < 0)
		return -EACCES;
	return 0;
}

struct exec_hit {
	char file[PATH_MAX];
	int ret; /* as exec_probe(): the first executable, else the first file */
};

/* Look for @p name in each directory of the colon-separated @p dirs. */
static void
exec_search(const char *dirs, const char *name, struct exec_hit *hit)
{
	char file[PATH_MAX];
	const char *end;
	size_t len;
	int n, ret;

	for (; dirs != NULL && *dirs != '\0' && hit->ret != 0; dirs = end + (*end == ':')) {
		end = strchrnul(dirs, ':');
		len = end - dirs;
		if (len == 0) /* unlike execvp, an empty entry does not mean "." */
			continue;
		n = snprintf(file, sizeof(file), "%.*s/%s", (int)len, dirs, name);
		if (n < 0 || (size_t)n >= sizeof(file))
			continue;
		ret = exec_probe(file);
		if (ret == 0 || (ret == -EACCES && hit->ret == -ENOENT)) {
			strcpy(hit->file, file);
			hit->ret = ret;
		}
	}
}

/* A name with a '/' is relative to the config file's directory. */
static void
exec_at_path(const struct ctx *c, const char *name, struct exec_hit *hit)
{
	const char *slash = strrchr(c->path, '/');
	int n;

	if (name[0] == '/' || slash == NULL)
		n = snprintf(hit->file, sizeof(hit->file), "%s", name);
	else
		n = snprintf(hit->file, sizeof(hit->file), "%.*s/%s", (int)(slash - c->path),
			     c->path, name);
	hit->ret = n < 0 || (size_t)n >= sizeof(hit->file) ? -ENOENT : exec_probe(hit->file);
}

static int
get_exec(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	 char out[SQ_CFG_PATH_LEN])
{
	struct exec_hit hit = {.ret = -ENOENT};
	char real[PATH_MAX];
	const char *name;

	name = scalar_text(node);
	if (name == NULL || name[0] == '\0')
		return fail(c, node, base, key, "expected a program name or path, got %s",
			    describe(c, node));
	if (strchr(name, '/') != NULL) {
		exec_at_path(c, name, &hit);
	} else {
		exec_search(c->nf_path, name, &hit);
		exec_search(getenv("PATH"), name, &hit);
	}
	if (hit.ret == -ENOENT && name[0] == '/')
		return fail(c, node, base, key, "\"%s\" not found", name);
	if (hit.ret == -ENOENT && strchr(name, '/') != NULL)
		return fail(c, node, base, key, "\"%s\" not found (looked for \"%s\")", name,
			    hit.file);
	if (hit.ret == -ENOENT)
		return fail(c, node, base, key, "\"%s\" not found in %s%s$PATH", name,
			    c->nf_path != NULL ? c->nf_path : "",
			    c->nf_path != NULL && c->nf_path[0] != '\0' ? " or " : "");
	if (realpath(hit.file, real) == NULL)
		return fail(c, node, base, key, "\"%s\": %s", hit.file, strerror(errno));
	if (hit.ret == -EACCES)
		return fail(c, node, base, key, "\"%s\" is not executable", real);
	if (strlen(real) >= SQ_CFG_PATH_LEN)
		return fail(c, node, base, key, "\"%s\": path longer than %d characters", real,
			    SQ_CFG_PATH_LEN - 1);
	strcpy(out, real);
	return 0;
}

static int
get_args(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	 struct sq_cfg_service *svc)
{
	const yaml_node_t *item;
	char field[64];
	const char *s;
	unsigned int i, n = 0;
	int ret;

	if (node == NULL)
		return 0;
	ret = get_seq(c, node, base, key, 0, SQ_MAX_NF_ARGS, &n);
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		item = seq_item(c, node, i);
		snprintf(field, sizeof(field), "%s.%s[%u]", base, key, i);
		s = scalar_text(item);
		if (s == NULL)
			return fail(c, item, field, NULL, "expected a string, got %s",
				    describe(c, item));
		svc->args[i] = strdup(s);
		if (svc->args[i] == NULL)
			return fail_nomem(c, item, field, NULL);
		svc->n_args = i + 1;
	}
	return 0;
}

enum {
	MGR_NAME,
	MGR_REGION_MB,
	MGR_MBUFS,
	MGR_DATA_ROOM,
	MGR_STATS_MS,
	MGR_NF_CORE,
	MGR_RX_BURST,
	MGR_CHAIN_PRIO,
	MGR_MAX_FLOWS,
	MGR_FLOW_IDLE,
	MGR_FLOW_LINGER,
	MGR_FLOW_HALF_OPEN,
	MGR_FLOW_UNESTABLISHED,
	MGR_CORE_WAKES,
	MGR_MAX_NFS,
	MGR_NF_USER,
	MGR_ATTACH_USERS,
	MGR_IDLE_SLEEP_MAX,
	MGR_IDLE_AFTER,
	MGR_IDLE_AFTER_LOAD,
	MGR_CORE_YIELD_ROUNDS,
	MGR_RX_BACKPRESSURE,
	MGR_NICE,
	MGR_CONTROL_RT,
	MGR_N_KEYS
};
static int get_word(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
		    const char *const *words, uint32_t n_words, uint32_t *out);
static const char *const bool_words[] = {"false", "true"};

static const char *const mgr_keys[MGR_N_KEYS] = {
	"name",
	"region_mb",
	"mbufs",
	"mbuf_data_room",
	"stats_interval_ms",
	"nf_core",
	"rx_burst",
	"chain_priority",
	"max_flows",
	"flow_idle_timeout_ms",
	"flow_linger_ms",
	"flow_half_open_timeout_ms",
	"flow_unestablished_per_source",
	"core_wakes_per_s",
	"max_nfs",
	"nf_user",
	"attach_users",
	"idle_sleep_max_us",
	"idle_after_us",
	"idle_after_load",
	"core_yield_rounds",
	"rx_backpressure",
	"nice",
	"control_realtime",
};

/* nf_user: a user name or a numeric uid, resolved now so that a typo is a
 * config error, not an NF that cannot start. */
static int
get_nf_user(struct ctx *c, const yaml_node_t *node, const char *b)
{
	struct sq_config *cfg = c->cfg;
	const struct passwd *pw;
	char *end;
	unsigned long uid;

	if (node != NULL && get_name(c, node, b, "nf_user", cfg->nf_user) != 0)
		return -EINVAL;
	errno = 0;
	uid = strtoul(cfg->nf_user, &end, 10);
	if (*end == '\0' && errno == 0 && uid < UINT32_MAX)
		pw = getpwuid((uid_t)uid);
	else
		pw = getpwnam(cfg->nf_user);
	if (pw != NULL) {
		cfg->nf_uid = pw->pw_uid;
		cfg->nf_gid = pw->pw_gid;
		return 0;
	}
	if (node == NULL)
		return fail_line(c, 1, b, "nf_user",
				 "no user \"%s\" (the default): scripts/setup.sh makes it, or "
				 "name another unprivileged user",
				 cfg->nf_user);
	return fail(c, node, b, "nf_user", "no such user \"%s\"", cfg->nf_user);
}

/* attach_users: names or uids; a uid with no passwd entry is taken as it is
 * (a container's), a name must exist. */
static int
get_attach_users(struct ctx *c, const yaml_node_t *node, const char *b)
{
	struct sq_config *cfg = c->cfg;
	unsigned int n = 0;
	int ret;

	if (node == NULL)
		return 0;
	ret = get_seq(c, node, b, "attach_users", 0, SQ_MAX_ATTACH_UIDS, &n);
	for (unsigned int i = 0; ret == 0 && i < n; i++) {
		const yaml_node_t *item = seq_item(c, node, i);
		char name[SQ_CFG_NAME_LEN], field[32], *end;
		const struct passwd *pw;
		unsigned long uid;

		snprintf(field, sizeof(field), "attach_users[%u]", i);
		ret = get_name(c, item, b, field, name);
		if (ret != 0)
			break;
		errno = 0;
		uid = strtoul(name, &end, 10);
		if (*end == '\0' && errno == 0 && uid < UINT32_MAX) {
			cfg->attach_uids[i] = (uint32_t)uid;
		} else {
			pw = getpwnam(name);
			if (pw == NULL)
				return fail(c, item, b, field, "no such user \"%s\"", name);
			cfg->attach_uids[i] = pw->pw_uid;
		}
		cfg->n_attach_uids = (uint16_t)(i + 1);
	}
	return ret;
}

static int
parse_manager(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	yaml_node_t *v[MGR_N_KEYS];
	const char *b = "manager";
	int ret;

	if (node == NULL)
		return get_nf_user(c, NULL, b);
	ret = map_get(c, node, b, mgr_keys, MGR_N_KEYS, 0, v);
	if (ret == 0)
		ret = get_name(c, v[MGR_NAME], b, "name", cfg->name);
	if (ret == 0)
		ret = get_u32(c, v[MGR_REGION_MB], b, "region_mb", 16, 65536, &cfg->region_mb);
	if (ret == 0)
		ret = get_u32(c, v[MGR_MBUFS], b, "mbufs", 1023, 4194303, &cfg->mbufs);
	if (ret == 0)
		ret = get_u32(c, v[MGR_DATA_ROOM], b, "mbuf_data_room", 512, 65535,
			      &cfg->mbuf_data_room);
	if (ret == 0)
		ret = get_u32(c, v[MGR_STATS_MS], b, "stats_interval_ms", 0, 3600000,
			      &cfg->stats_interval_ms);
	if (ret == 0)
		ret = get_i32(c, v[MGR_NF_CORE], b, "nf_core", -1, 1023, &cfg->nf_core);
	if (ret == 0)
		ret = get_u32(c, v[MGR_RX_BURST], b, "rx_burst", 1, 256, &cfg->rx_burst);
	if (ret == 0)
		ret = get_u32(c, v[MGR_CHAIN_PRIO], b, "chain_priority", 0, 90,
			      &cfg->chain_priority);
	if (ret == 0)
		ret = get_u32(c, v[MGR_MAX_FLOWS], b, "max_flows", 1024, 16777216, &cfg->max_flows);
	if (ret == 0)
		ret = get_u32(c, v[MGR_FLOW_IDLE], b, "flow_idle_timeout_ms", 1, 3600000,
			      &cfg->flow_idle_timeout_ms);
	if (ret == 0)
		ret = get_u32(c, v[MGR_FLOW_LINGER], b, "flow_linger_ms", 0, 600000,
			      &cfg->flow_linger_ms);
	if (ret == 0)
		ret = get_u32(c, v[MGR_MAX_NFS], b, "max_nfs", 0, 1u << 20, &cfg->max_nfs);
	c->max_nfs_node = v[MGR_MAX_NFS];
	if (ret == 0)
		ret = get_u32(c, v[MGR_FLOW_HALF_OPEN], b, "flow_half_open_timeout_ms", 1, 3600000,
			      &cfg->flow_half_open_timeout_ms);
	if (ret == 0)
		ret = get_u32(c, v[MGR_FLOW_UNESTABLISHED], b, "flow_unestablished_per_source", 0,
			      65535, &cfg->flow_unestablished_per_source);
	if (ret == 0)
		ret = get_u32(c, v[MGR_CORE_WAKES], b, "core_wakes_per_s", 0, 10000000,
			      &cfg->core_wakes_per_s);
	if (ret == 0)
		ret = get_u32(c, v[MGR_IDLE_SLEEP_MAX], b, "idle_sleep_max_us", 0, 100000,
			      &cfg->idle_sleep_max_us);
	if (ret == 0)
		ret = get_u32(c, v[MGR_IDLE_AFTER], b, "idle_after_us", 0, 10000000,
			      &cfg->idle_after_us);
	if (ret == 0 && v[MGR_IDLE_AFTER_LOAD] != NULL) {
		uint32_t w = 0;

		ret = get_word(c, v[MGR_IDLE_AFTER_LOAD], b, "idle_after_load", bool_words,
			       RTE_DIM(bool_words), &w);
		cfg->idle_after_load = w == 1;
	}
	if (ret == 0)
		ret = get_u32(c, v[MGR_CORE_YIELD_ROUNDS], b, "core_yield_rounds", 1, 64,
			      &cfg->core_yield_rounds);
	if (ret == 0 && v[MGR_RX_BACKPRESSURE] != NULL) {
		uint32_t w = 0;

		ret = get_word(c, v[MGR_RX_BACKPRESSURE], b, "rx_backpressure", bool_words,
			       RTE_DIM(bool_words), &w);
		cfg->rx_backpressure = w == 1;
	}
	if (ret == 0 && v[MGR_CONTROL_RT] != NULL) {
		uint32_t w = 1;

		ret = get_word(c, v[MGR_CONTROL_RT], b, "control_realtime", bool_words,
			       RTE_DIM(bool_words), &w);
		cfg->control_realtime = w == 1;
	}
	if (ret == 0)
		ret = get_i32(c, v[MGR_NICE], b, "nice", -20, 19, &cfg->mgr_nice);
	if (ret == 0)
		ret = get_nf_user(c, v[MGR_NF_USER], b);
	if (ret == 0)
		ret = get_attach_users(c, v[MGR_ATTACH_USERS], b);
	return ret;
}

/* devargs: one string, or a list of alternatives tried in order. */
static int
get_devargs(struct ctx *c, const yaml_node_t *node, const char *base, struct sq_cfg_port *port)
{
	char field[64];
	unsigned int i, n = 0;
	int ret;

	if (node->type != YAML_SEQUENCE_NODE) {
		port->n_devargs = 1;
		return get_str(c, node, base, "devargs", port->devargs[0], SQ_CFG_DEVARGS_LEN);
	}
	ret = get_seq(c, node, base, "devargs", 1, SQ_MAX_DEVARGS_ALT, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(field, sizeof(field), "devargs[%u]", i);
		ret = get_str(c, seq_item(c, node, i), base, field, port->devargs[i],
			      SQ_CFG_DEVARGS_LEN);
		port->n_devargs = (uint16_t)(i + 1);
	}
	return ret;
}

enum { PORT_NAME, PORT_DEVARGS, PORT_RX_DESC, PORT_TX_DESC, PORT_N_KEYS };
static const char *const port_keys[PORT_N_KEYS] = {"name", "devargs", "rx_desc", "tx_desc"};

static int
parse_port(struct ctx *c, const yaml_node_t *node, const char *b, struct sq_cfg_port *port)
{
	yaml_node_t *v[PORT_N_KEYS];
	int ret, dup;

	port->rx_desc = 1024;
	port->tx_desc = 1024;
	port->line = node_line(node);
	ret = map_get(c, node, b, port_keys, PORT_N_KEYS, REQ(PORT_NAME) | REQ(PORT_DEVARGS), v);
	if (ret == 0)
		ret = get_name(c, v[PORT_NAME], b, "name", port->name);
	dup = ret == 0 ? sq_config_port_index(c->cfg, port->name) : -1;
	if (dup >= 0)
		return fail(c, v[PORT_NAME], b, "name",
			    "duplicate port name \"%s\" (first at line %d)", port->name,
			    c->cfg->ports[dup].line);
	if (ret == 0)
		ret = get_devargs(c, v[PORT_DEVARGS], b, port);
	if (ret == 0)
		ret = get_u16(c, v[PORT_RX_DESC], b, "rx_desc", 64, 16384, &port->rx_desc);
	if (ret == 0)
		ret = get_u16(c, v[PORT_TX_DESC], b, "tx_desc", 64, 16384, &port->tx_desc);
	return ret;
}

static int
parse_ports(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	unsigned int i, n = 0;
	char b[32];
	int ret;

	ret = get_seq(c, node, "", "ports", 1, SQ_MAX_PORTS, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(b, sizeof(b), "ports[%u]", i);
		ret = parse_port(c, seq_item(c, node, i), b, &cfg->ports[i]);
		if (ret == 0)
			cfg->n_ports = i + 1;
	}
	return ret;
}

/* One of a fixed set of words, stored as its index. */
static int
get_word(struct ctx *c, const yaml_node_t *node, const char *base, const char *key,
	 const char *const *words, uint32_t n_words, uint32_t *out)
{
	char want[128] = "";
	size_t off = 0;
	const char *s;

	if (node == NULL)
		return 0;
	s = scalar_text(node);
	for (uint32_t i = 0; s != NULL && i < n_words; i++) {
		if (strcmp(s, words[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	for (uint32_t i = 0; i < n_words && off < sizeof(want); i++)
		off += (size_t)snprintf(want + off, sizeof(want) - off, "%s\"%s\"",
					i == 0 ? "" : (i + 1 == n_words ? " or " : ", "), words[i]);
	return fail(c, node, base, key, "expected %s, got %s", want, describe(c, node));
}

static const char *const assign_words[] = {
	[SQ_ASSIGN_RSS] = "rss",
	[SQ_ASSIGN_PER_FLOW] = "per-flow",
	[SQ_ASSIGN_ROUND_ROBIN] = "round-robin",
	[SQ_ASSIGN_SPRAY] = "spray",
};

static const char *const fallback_words[] = {
	[SQ_FALLBACK_DROP] = "drop",
	[SQ_FALLBACK_RSS] = "rss",
	[SQ_FALLBACK_QUEUE] = "queue",
};

static const char *const sandbox_words[] = {
	[SQ_SANDBOX_NONE] = "none",
	[SQ_SANDBOX_STRICT] = "strict",
	[SQ_SANDBOX_ISOLATED] = "isolated",
};

static const char *const restart_words[] = {
	[SQ_RESTART_ALWAYS] = "always",
	[SQ_RESTART_ON_FAILURE] = "on-failure",
	[SQ_RESTART_NEVER] = "never",
};

static const char *const pool_order_words[] = {
	[SQ_POOL_FIFO] = "fifo",
	[SQ_POOL_LIFO] = "lifo",
};

enum { WAKE_POLICY, WAKE_THRESH, WAKE_TIMEOUT, WAKE_MIN, WAKE_MAX, WAKE_T_LAT, WAKE_N_KEYS };
static const char *const wake_keys[WAKE_N_KEYS] = {
	"policy", "thresh_pkts", "timeout_us", "min_pkts", "max_pkts", "t_lat_pkts",
};

static int
parse_wake(struct ctx *c, const yaml_node_t *node, const char *base, struct sq_cfg_wake *w)
{
	yaml_node_t *v[WAKE_N_KEYS];
	uint32_t timeout_us = 100;
	char b[48];
	int ret;

	*w = (struct sq_cfg_wake){.policy = SQ_WAKE_MIN,
				  .thresh_pkts = 32,
				  .min_pkts = 1,
				  .max_pkts = 64,
				  .t_lat_pkts = 36};
	if (node == NULL) {
		w->timeout_ns = (uint64_t)timeout_us * 1000;
		return 0;
	}
	snprintf(b, sizeof(b), "%s.wake", base);
	ret = map_get(c, node, b, wake_keys, WAKE_N_KEYS, 0, v);
	if (ret == 0)
		ret = get_policy(c, v[WAKE_POLICY], b, "policy", &w->policy);
	if (ret == 0)
		ret = get_u32(c, v[WAKE_THRESH], b, "thresh_pkts", 1, 65536, &w->thresh_pkts);
	if (ret == 0)
		ret = get_u32(c, v[WAKE_TIMEOUT], b, "timeout_us", 1, 10000000, &timeout_us);
	if (ret == 0)
		ret = get_u32(c, v[WAKE_MIN], b, "min_pkts", 1, 65536, &w->min_pkts);
	if (ret == 0)
		ret = get_u32(c, v[WAKE_MAX], b, "max_pkts", 1, 65536, &w->max_pkts);
	if (ret == 0)
		ret = get_u32(c, v[WAKE_T_LAT], b, "t_lat_pkts", 0, 1000000, &w->t_lat_pkts);
	if (ret == 0 && w->min_pkts > w->max_pkts)
		return fail(c, v[WAKE_MIN] ? v[WAKE_MIN] : node, b, "min_pkts",
			    "%u is above max_pkts %u", w->min_pkts, w->max_pkts);
	w->timeout_ns = (uint64_t)timeout_us * 1000;
	return ret;
}

enum {
	SCALE_MIN,
	SCALE_MAX,
	SCALE_HIGH,
	SCALE_LOW,
	SCALE_INTERVAL,
	SCALE_HOLD,
	SCALE_QUEUE,
	SCALE_DROP_MEMORY,
	SCALE_N_KEYS
};
static const char *const scale_keys[SCALE_N_KEYS] = {
	"min",
	"max",
	"high_wm",
	"low_wm",
	"interval_ms",
	"hold_intervals",
	"queue_high_pkts",
	"drop_memory_ms",
};

/* scale: {min, max, high_wm, low_wm, interval_ms, hold_intervals,
 * queue_high_pkts, drop_memory_ms}; every key has a default that works
 * untuned. The instance count starts at `instances` (default min) and
 * reserves max. */
static int
parse_scale(struct ctx *c, const yaml_node_t *node, const char *base, struct sq_cfg_service *svc,
	    bool has_instances, bool has_max_instances)
{
	struct sq_cfg_scale *sc = &svc->scale;
	yaml_node_t *v[SCALE_N_KEYS];
	char b[48];
	int ret;

	*sc = (struct sq_cfg_scale){
		.min = 1,
		.max = 4,
		.high_wm_pct = 80,
		.low_wm_pct = 30,
		.interval_ms = 2,
		.hold_intervals = 5,
		.queue_high_pkts = svc->ring_slots / 2,
		.drop_memory_ms = 10000,
	};
	if (node == NULL)
		return 0;
	sc->enabled = true;
	sc->line = node_line(node);
	snprintf(b, sizeof(b), "%s.scale", base);
	ret = map_get(c, node, b, scale_keys, SCALE_N_KEYS, 0, v);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_MIN], b, "min", 1, 16384, &sc->min);
	if (ret == 0 && v[SCALE_MAX] == NULL)
		sc->max = RTE_MAX(sc->max, sc->min);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_MAX], b, "max", sc->min, 16384, &sc->max);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_HIGH], b, "high_wm", 1, 100, &sc->high_wm_pct);
	/* A high_wm at or below low_wm's default: the default must not be
	 * kept silently (the config written back would not load). */
	if (ret == 0 && v[SCALE_LOW] == NULL && sc->low_wm_pct >= sc->high_wm_pct)
		return fail(c, v[SCALE_HIGH], b, "high_wm",
			    "%u is not above low_wm %u (its default): give low_wm below it",
			    sc->high_wm_pct, sc->low_wm_pct);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_LOW], b, "low_wm", 0, sc->high_wm_pct - 1,
			      &sc->low_wm_pct);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_INTERVAL], b, "interval_ms", 1, 60000, &sc->interval_ms);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_HOLD], b, "hold_intervals", 1, 1000, &sc->hold_intervals);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_QUEUE], b, "queue_high_pkts", 1, svc->ring_slots,
			      &sc->queue_high_pkts);
	if (ret == 0)
		ret = get_u32(c, v[SCALE_DROP_MEMORY], b, "drop_memory_ms", 0, 3600000,
			      &sc->drop_memory_ms);
	if (ret != 0)
		return ret;
	if (!has_instances)
		svc->instances = sc->min;
	else if (svc->instances < sc->min || svc->instances > sc->max)
		return fail(c, node, base, "instances",
			    "%u is outside scale.min..scale.max (%u..%u)", svc->instances, sc->min,
			    sc->max);
	if (has_max_instances && svc->max_instances < sc->max)
		return fail(c, node, b, "max", "%u is above max_instances %u", sc->max,
			    svc->max_instances);
	svc->max_instances = RTE_MAX(svc->max_instances, sc->max);
	return 0;
}

enum {
	SVC_NAME,
	SVC_EXEC,
	SVC_ARGS,
	SVC_MODE,
	SVC_INSTANCES,
	SVC_RING_SLOTS,
	SVC_BURST_MAX,
	SVC_BUDGET,
	SVC_SPIN_US,
	SVC_WAKE,
	SVC_PRIORITY,
	SVC_NICE,
	SVC_SCHED_BATCH,
	SVC_POOL_IDLE,
	SVC_POOL_FALLBACK,
	SVC_POOL_QUEUE,
	SVC_POOL_ORDER,
	SVC_POOL_BACKLOG,
	SVC_MAX_INSTANCES,
	SVC_RESTART,
	SVC_RESTART_BACKOFF,
	SVC_RESTART_BACKOFF_MAX,
	SVC_RESTART_LIMIT,
	SVC_RESTART_WINDOW,
	SVC_WATCHDOG,
	SVC_MAX_OUTSTANDING,
	SVC_SANDBOX,
	SVC_MEMORY_MB,
	SVC_CPU_MAX_PCT,
	SVC_CPU_WEIGHT,
	SVC_MEMORY_MAX_MB,
	SVC_PIDS_MAX,
	SVC_SCALE,
	SVC_OUT_PORTS,
	SVC_TO_SERVICES,
	SVC_N_KEYS
};
/* (in enum sq_sched_batch's order) */
static const char *const sched_batch_words[] = {"auto", "true", "false"};
static const char *const svc_keys[SVC_N_KEYS] = {
	"name",
	"exec",
	"args",
	"mode",
	"instances",
	"ring_slots",
	"burst_max",
	"batch_budget_pkts",
	"spin_us",
	"wake",
	"priority",
	"nice",
	"sched_batch",
	"pool_idle",
	"pool_fallback",
	"pool_queue_pkts",
	"pool_order",
	"pool_backlog_max",
	"max_instances",
	"restart",
	"restart_backoff_ms",
	"restart_backoff_max_ms",
	"restart_limit",
	"restart_window_s",
	"watchdog_ms",
	"max_outstanding_pkts",
	"sandbox",
	"memory_mb",
	"cpu_max_pct",
	"cpu_weight",
	"memory_max_mb",
	"pids_max",
	"scale",
	"out_ports",
	"to_services",
};

/* cgroup v2's own bounds: cpu.max takes at least 1 ms of a 100 ms period,
 * cpu.weight 1..10000; 0 leaves a limit off. */
static int
parse_cgroup(struct ctx *c, yaml_node_t *const *v, const char *b, struct sq_cfg_cgroup *cg)
{
	int ret;

	ret = get_u32(c, v[SVC_CPU_MAX_PCT], b, "cpu_max_pct", 0, 102400, &cg->cpu_max_pct);
	if (ret == 0)
		ret = get_u32(c, v[SVC_CPU_WEIGHT], b, "cpu_weight", 0, 10000, &cg->cpu_weight);
	if (ret == 0)
		ret = get_u32(c, v[SVC_MEMORY_MAX_MB], b, "memory_max_mb", 0, 1u << 20,
			      &cg->memory_max_mb);
	if (ret == 0)
		ret = get_u32(c, v[SVC_PIDS_MAX], b, "pids_max", 0, 4194304, &cg->pids_max);
	return ret;
}

/* A list of names of @p what (ports: defined above; services: any) as a
 * bit per index. */
static int
get_grants(struct ctx *c, const yaml_node_t *node, const char *b, const char *key, const char *what,
	   index_fn find, unsigned int max, uint64_t *mask)
{
	unsigned int n = 0;
	char field[64];
	int ret, idx = -1;

	*mask = 0;
	ret = get_seq(c, node, b, key, 0, max, &n);
	for (unsigned int i = 0; ret == 0 && i < n; i++) {
		snprintf(field, sizeof(field), "%s.%s[%u]", b, key, i);
		ret = get_ref(c, seq_item(c, node, i), field, NULL, what, find, &idx);
		if (ret == 0)
			*mask |= UINT64_C(1) << idx;
	}
	return ret;
}

/* out_ports (ports are known by now); to_services waits for the rest. */
static int
parse_verdict_grants(struct ctx *c, yaml_node_t *const *v, const char *b,
		     struct sq_cfg_service *svc, unsigned int idx)
{
	bool isolated = svc->sandbox == SQ_SANDBOX_ISOLATED;
	uint64_t mask;
	int ret = 0;

	svc->out_ports = isolated ? 0 : UINT32_MAX;
	svc->to_services = isolated ? 0 : UINT64_MAX;
	if (v[SVC_OUT_PORTS] != NULL) {
		ret = get_grants(c, v[SVC_OUT_PORTS], b, "out_ports", "port", sq_config_port_index,
				 SQ_MAX_PORTS, &mask);
		svc->out_ports = (uint32_t)mask;
	}
	c->to_services[idx] = v[SVC_TO_SERVICES];
	return ret;
}

static int
resolve_to_services(struct ctx *c)
{
	char b[32];
	int ret = 0;

	for (uint16_t s = 0; ret == 0 && s < c->cfg->n_services; s++) {
		if (c->to_services[s] == NULL)
			continue;
		snprintf(b, sizeof(b), "services[%u]", s);
		ret = get_grants(c, c->to_services[s], b, "to_services", "service",
				 sq_config_service_index, SQ_MAX_SERVICES,
				 &c->cfg->services[s].to_services);
	}
	return ret;
}

static int
parse_service(struct ctx *c, const yaml_node_t *node, const char *b, struct sq_cfg_service *svc,
	      unsigned int idx)
{
	yaml_node_t *v[SVC_N_KEYS];
	uint32_t spin_us = 20;
	int ret, dup;

	svc->mode = SQ_NF_MODE_SLEEP;
	svc->instances = 1;
	svc->ring_slots = 1024;
	svc->burst_max = 32;
	svc->batch_budget_pkts = 256;
	svc->line = node_line(node);
	ret = map_get(c, node, b, svc_keys, SVC_N_KEYS, REQ(SVC_NAME) | REQ(SVC_EXEC), v);
	if (ret == 0)
		ret = get_name(c, v[SVC_NAME], b, "name", svc->name);
	dup = ret == 0 ? sq_config_service_index(c->cfg, svc->name) : -1;
	if (dup >= 0)
		return fail(c, v[SVC_NAME], b, "name",
			    "duplicate service name \"%s\" (first at line %d)", svc->name,
			    c->cfg->services[dup].line);
	if (ret == 0)
		ret = get_exec(c, v[SVC_EXEC], b, "exec", svc->exec);
	if (ret == 0)
		ret = get_args(c, v[SVC_ARGS], b, "args", svc);
	if (ret == 0)
		ret = get_mode(c, v[SVC_MODE], b, "mode", &svc->mode);
	if (ret == 0)
		ret = get_u32(c, v[SVC_INSTANCES], b, "instances", 1, 16384, &svc->instances);
	if (ret == 0)
		ret = get_pow2_u32(c, v[SVC_RING_SLOTS], b, "ring_slots", 64, 65536,
				   &svc->ring_slots);
	if (ret == 0)
		ret = get_u32(c, v[SVC_BURST_MAX], b, "burst_max", 1, SQ_NF_BURST_MAX,
			      &svc->burst_max);
	if (ret == 0)
		ret = get_u32(c, v[SVC_BUDGET], b, "batch_budget_pkts", 0, 1000000,
			      &svc->batch_budget_pkts);
	if (ret == 0)
		ret = get_u32(c, v[SVC_SPIN_US], b, "spin_us", 0, 1000000, &spin_us);
	if (ret == 0)
		ret = parse_wake(c, v[SVC_WAKE], b, &svc->wake);
	if (ret == 0)
		ret = get_u32(c, v[SVC_PRIORITY], b, "priority", 0, SQ_NF_PRIORITY_MAX,
			      &svc->priority);
	if (ret == 0)
		ret = get_i32(c, v[SVC_NICE], b, "nice", -20, 19, &svc->nice);
	if (ret == 0)
		ret = get_word(c, v[SVC_SCHED_BATCH], b, "sched_batch", sched_batch_words,
			       RTE_DIM(sched_batch_words), &svc->sched_batch);
	svc->pool_idle = svc->instances;
	if (ret == 0)
		ret = get_u32(c, v[SVC_POOL_IDLE], b, "pool_idle", 0, svc->instances,
			      &svc->pool_idle);
	if (ret == 0)
		ret = get_word(c, v[SVC_POOL_FALLBACK], b, "pool_fallback", fallback_words,
			       RTE_DIM(fallback_words), &svc->pool_fallback);
	svc->pool_queue_pkts = 1024;
	if (ret == 0)
		ret = get_u32(c, v[SVC_POOL_QUEUE], b, "pool_queue_pkts", 1, 1u << 20,
			      &svc->pool_queue_pkts);
	if (ret == 0)
		ret = get_word(c, v[SVC_POOL_ORDER], b, "pool_order", pool_order_words,
			       RTE_DIM(pool_order_words), &svc->pool_order);
	if (ret == 0)
		ret = get_u32(c, v[SVC_POOL_BACKLOG], b, "pool_backlog_max", 0, 1000000,
			      &svc->pool_backlog_max);
	svc->max_instances = svc->instances;
	if (ret == 0)
		ret = get_u32(c, v[SVC_MAX_INSTANCES], b, "max_instances", svc->instances, 16384,
			      &svc->max_instances);
	svc->restart_backoff_ms = 1;
	svc->restart_backoff_max_ms = 5000;
	svc->restart_limit = 10;
	svc->restart_window_s = 60;
	svc->watchdog_ms = 1000;
	if (ret == 0)
		ret = get_word(c, v[SVC_RESTART], b, "restart", restart_words,
			       RTE_DIM(restart_words), &svc->restart);
	if (ret == 0)
		ret = get_u32(c, v[SVC_RESTART_BACKOFF], b, "restart_backoff_ms", 0, 600000,
			      &svc->restart_backoff_ms);
	if (ret == 0)
		ret = get_u32(c, v[SVC_RESTART_BACKOFF_MAX], b, "restart_backoff_max_ms",
			      RTE_MAX(svc->restart_backoff_ms, 1u), 600000,
			      &svc->restart_backoff_max_ms);
	if (ret == 0 && v[SVC_RESTART_BACKOFF_MAX] == NULL)
		svc->restart_backoff_max_ms =
			RTE_MAX(svc->restart_backoff_max_ms, svc->restart_backoff_ms);
	if (ret == 0)
		ret = get_u32(c, v[SVC_RESTART_LIMIT], b, "restart_limit", 1, 1000000,
			      &svc->restart_limit);
	if (ret == 0)
		ret = get_u32(c, v[SVC_RESTART_WINDOW], b, "restart_window_s", 1, 86400,
			      &svc->restart_window_s);
	if (ret == 0)
		ret = get_u32(c, v[SVC_WATCHDOG], b, "watchdog_ms", 0, 3600000, &svc->watchdog_ms);
	/* A well-behaved NF holds at most its rx ring, a burst and its tx ring. */
	svc->max_outstanding_pkts = 2 * svc->ring_slots + 64;
	if (ret == 0)
		ret = get_u32(c, v[SVC_MAX_OUTSTANDING], b, "max_outstanding_pkts", 1, 1u << 24,
			      &svc->max_outstanding_pkts);
	if (ret == 0)
		ret = get_word(c, v[SVC_SANDBOX], b, "sandbox", sandbox_words,
			       RTE_DIM(sandbox_words), &svc->sandbox);
	if (ret == 0)
		ret = get_u32(c, v[SVC_MEMORY_MB], b, "memory_mb", 0, 1u << 20, &svc->memory_mb);
	if (ret == 0)
		ret = parse_cgroup(c, v, b, &svc->cgroup);
	if (ret == 0)
		ret = parse_verdict_grants(c, v, b, svc, idx);
	svc->spin_ns = (uint64_t)spin_us * 1000;
	if (ret == 0)
		ret = parse_scale(c, v[SVC_SCALE], b, svc, v[SVC_INSTANCES] != NULL,
				  v[SVC_MAX_INSTANCES] != NULL);
	return ret;
}

static int
parse_services(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	unsigned int i, n = 0;
	char b[32];
	int ret;

	ret = get_seq(c, node, "", "services", 1, SQ_MAX_SERVICES, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(b, sizeof(b), "services[%u]", i);
		ret = parse_service(c, seq_item(c, node, i), b, &cfg->services[i], i);
		if (ret == 0)
			cfg->n_services = i + 1;
	}
	if (ret == 0)
		ret = resolve_to_services(c);
	return ret;
}

static int
get_hops(struct ctx *c, const yaml_node_t *node, const char *b, const char *key,
	 struct sq_cfg_chain *chain)
{
	unsigned int i, n = 0;
	char field[64];
	int ret, idx = -1;

	ret = get_seq(c, node, b, key, 1, SQ_MAX_HOPS, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(field, sizeof(field), "%s.%s[%u]", b, key, i);
		ret = get_ref(c, seq_item(c, node, i), field, NULL, "service",
			      sq_config_service_index, &idx);
		chain->services[i] = (uint16_t)idx;
	}
	if (ret == 0)
		chain->n_hops = (uint16_t)n;
	return ret;
}

enum { CHAIN_NAME, CHAIN_SERVICES, CHAIN_DIRECT, CHAIN_HOP_NICE, CHAIN_N_KEYS };
static const char *const chain_keys[CHAIN_N_KEYS] = {"name", "services", "direct", "hop_nice_step"};

static int
parse_chain(struct ctx *c, const yaml_node_t *node, const char *b, struct sq_cfg_chain *chain)
{
	yaml_node_t *v[CHAIN_N_KEYS];
	int ret, dup;

	chain->line = node_line(node);
	ret = map_get(c, node, b, chain_keys, CHAIN_N_KEYS, REQ(CHAIN_NAME) | REQ(CHAIN_SERVICES),
		      v);
	if (ret == 0)
		ret = get_name(c, v[CHAIN_NAME], b, "name", chain->name);
	dup = ret == 0 ? sq_config_chain_index(c->cfg, chain->name) : -1;
	if (dup >= 0)
		return fail(c, v[CHAIN_NAME], b, "name",
			    "duplicate chain name \"%s\" (first at line %d)", chain->name,
			    c->cfg->chains[dup].line);
	if (ret == 0)
		ret = get_hops(c, v[CHAIN_SERVICES], b, "services", chain);
	if (ret == 0 && v[CHAIN_DIRECT] != NULL) {
		uint32_t w = 0;

		ret = get_word(c, v[CHAIN_DIRECT], b, "direct", bool_words, RTE_DIM(bool_words),
			       &w);
		chain->direct = w == 1;
		chain->direct_line = node_line(v[CHAIN_DIRECT]);
	}
	chain->hop_nice_step = -1;
	if (ret == 0 && v[CHAIN_HOP_NICE] != NULL) {
		uint32_t step = 0;

		ret = get_u32(c, v[CHAIN_HOP_NICE], b, "hop_nice_step", 0, 10, &step);
		chain->hop_nice_step = (int8_t)step;
	}
	return ret;
}

static int
parse_chains(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	unsigned int i, n = 0;
	char b[32];
	int ret;

	ret = get_seq(c, node, "", "chains", 1, SQ_MAX_CHAINS, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(b, sizeof(b), "chains[%u]", i);
		ret = parse_chain(c, seq_item(c, node, i), b, &cfg->chains[i]);
		if (ret == 0)
			cfg->n_chains = i + 1;
	}
	return ret;
}

enum {
	RULE_IN_PORT,
	RULE_DST_MAC,
	RULE_CHAIN,
	RULE_OUT_PORT,
	RULE_ASSIGN,
	RULE_NF_PRIO,
	RULE_N_KEYS
};
static const char *const rule_keys[RULE_N_KEYS] = {
	"in_port", "dst_mac", "chain", "out_port", "assign", "nf_priority",
};

static int
parse_rule(struct ctx *c, const yaml_node_t *node, const char *b, struct sq_cfg_rule *rule)
{
	yaml_node_t *v[RULE_N_KEYS];
	int in_port = -1, chain = -1, out_port = -1;
	int ret;

	rule->line = node_line(node);
	ret = map_get(c, node, b, rule_keys, RULE_N_KEYS, REQ(RULE_CHAIN) | REQ(RULE_OUT_PORT), v);
	if (ret == 0)
		ret = get_ref(c, v[RULE_IN_PORT], b, "in_port", "port", sq_config_port_index,
			      &in_port);
	if (ret == 0)
		ret = get_mac(c, v[RULE_DST_MAC], b, "dst_mac", &rule->dst_mac, &rule->has_dst_mac);
	if (ret == 0)
		ret = get_ref(c, v[RULE_CHAIN], b, "chain", "chain", sq_config_chain_index, &chain);
	if (ret == 0)
		ret = get_ref(c, v[RULE_OUT_PORT], b, "out_port", "port", sq_config_port_index,
			      &out_port);
	if (ret == 0)
		ret = get_word(c, v[RULE_ASSIGN], b, "assign", assign_words, RTE_DIM(assign_words),
			       &rule->assign);
	if (ret == 0)
		ret = get_u32(c, v[RULE_NF_PRIO], b, "nf_priority", 0, SQ_NF_PRIORITY_MAX,
			      &rule->nf_priority);
	rule->in_port = (int16_t)in_port;
	rule->chain = (uint16_t)chain;
	rule->out_port = (uint16_t)out_port;
	return ret;
}

static int
parse_rules(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	unsigned int i, n = 0;
	char b[32];
	int ret;

	ret = get_seq(c, node, "", "rules", 1, SQ_MAX_RULES, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(b, sizeof(b), "rules[%u]", i);
		ret = parse_rule(c, seq_item(c, node, i), b, &cfg->rules[i]);
		if (ret == 0)
			cfg->n_rules = i + 1;
	}
	return ret;
}

static int
get_sizes(struct ctx *c, const yaml_node_t *node, const char *base, struct sq_cfg_gen *gen)
{
	char field[64];
	unsigned int i, n = 0;
	/* A frame (FCS excluded) must fit in an mbuf after its headroom. */
	uint32_t fits = c->cfg->mbuf_data_room - RTE_PKTMBUF_HEADROOM + 4;
	uint16_t max = (uint16_t)RTE_MIN(1518u, fits);
	int ret;

	gen->sizes[0] = 64;
	gen->n_sizes = 1;
	if (node == NULL)
		return 0;
	ret = get_seq(c, node, base, "sizes", 1, SQ_MAX_GEN_SIZES, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(field, sizeof(field), "sizes[%u]", i);
		ret = get_u16(c, seq_item(c, node, i), base, field, 64, max, &gen->sizes[i]);
		gen->n_sizes = (uint16_t)(i + 1);
	}
	return ret;
}

static const char *const tcp_start_words[] = {"together", "staggered"};

enum { GEN_PORT, GEN_RATE, GEN_SIZES, GEN_FLOWS, GEN_DST_MAC, GEN_TCP, GEN_TCP_START, GEN_N_KEYS };
static const char *const gen_keys[GEN_N_KEYS] = {
	"port", "rate_pps", "sizes", "flows", "dst_mac", "tcp_flow_pkts", "tcp_start",
};

static int
parse_gen(struct ctx *c, const yaml_node_t *node, const char *b, struct sq_cfg_gen *gen)
{
	yaml_node_t *v[GEN_N_KEYS];
	uint32_t rate = 1000000;
	int port = -1;
	int ret;

	gen->line = node_line(node);
	gen->flows = 1024;
	ret = map_get(c, node, b, gen_keys, GEN_N_KEYS, REQ(GEN_PORT), v);
	if (ret == 0)
		ret = get_ref(c, v[GEN_PORT], b, "port", "port", sq_config_port_index, &port);
	if (ret == 0)
		ret = get_u32(c, v[GEN_RATE], b, "rate_pps", 0, 1000000000, &rate);
	if (ret == 0)
		ret = get_sizes(c, v[GEN_SIZES], b, gen);
	if (ret == 0)
		ret = get_u32(c, v[GEN_FLOWS], b, "flows", 1, 65536, &gen->flows);
	if (ret == 0)
		ret = get_mac(c, v[GEN_DST_MAC], b, "dst_mac", &gen->dst_mac, &gen->has_dst_mac);
	if (ret == 0 && v[GEN_TCP] != NULL) {
		uint16_t k = 0;

		ret = get_u16(c, v[GEN_TCP], b, "tcp_flow_pkts", 3, 10000, &k);
		gen->tcp_flow_pkts = k;
	}
	if (ret == 0 && v[GEN_TCP_START] != NULL) {
		uint32_t w = 0;

		ret = get_word(c, v[GEN_TCP_START], b, "tcp_start", tcp_start_words,
			       RTE_DIM(tcp_start_words), &w);
		gen->tcp_staggered = w == 1;
	}
	gen->port = (uint16_t)port;
	gen->rate_pps = rate;
	gen->enabled = ret == 0;
	for (uint16_t i = 0; ret == 0 && &c->cfg->gens[i] != gen; i++)
		if (c->cfg->gens[i].port == gen->port)
			return fail(c, v[GEN_PORT], b, "port",
				    "port \"%s\" has a generator already (line %d)",
				    c->cfg->ports[port].name, c->cfg->gens[i].line);
	return ret;
}

/* generator: one mapping, or a list of them on different ports. */
static int
parse_generator(struct ctx *c, const yaml_node_t *node)
{
	struct sq_config *cfg = c->cfg;
	unsigned int i, n = 0;
	char b[32];
	int ret;

	if (node == NULL)
		return 0;
	if (node->type == YAML_MAPPING_NODE) {
		ret = parse_gen(c, node, "generator", &cfg->gens[0]);
		cfg->n_gens = ret == 0;
		return ret;
	}
	ret = get_seq(c, node, "", "generator", 1, SQ_MAX_GENS, &n);
	for (i = 0; ret == 0 && i < n; i++) {
		snprintf(b, sizeof(b), "generator[%u]", i);
		ret = parse_gen(c, seq_item(c, node, i), b, &cfg->gens[i]);
		if (ret == 0)
			cfg->n_gens = (uint16_t)(i + 1);
	}
	return ret;
}

enum { TOP_MANAGER, TOP_PORTS, TOP_SERVICES, TOP_CHAINS, TOP_RULES, TOP_GENERATOR, TOP_N_KEYS };
static const char *const top_keys[TOP_N_KEYS] = {
	"manager", "ports", "services", "chains", "rules", "generator",
};

/* Sections in dependency order: chains name services, rules name ports and chains. */
/* The NF slots the region holds: every service's max_instances, and room for
 * services added while running. */
static int
check_max_nfs(struct ctx *c)
{
	struct sq_config *cfg = c->cfg;
	uint64_t reserved = sq_config_nfs_reserved(cfg);

	if (cfg->max_nfs == 0 || cfg->max_nfs >= reserved)
		return 0;
	return fail(c, c->max_nfs_node, "manager", "max_nfs",
		    "%u is below the %" PRIu64 " NF slots the services reserve (max_instances)",
		    cfg->max_nfs, reserved);
}

uint64_t
sq_config_nfs_reserved(const struct sq_config *cfg)
{
	uint64_t n = 0;

	for (uint16_t i = 0; i < cfg->n_services; i++)
		n += cfg->services[i].max_instances;
	return n;
}

uint32_t
sq_config_max_nfs(const struct sq_config *cfg)
{
	uint64_t reserved = sq_config_nfs_reserved(cfg);

	if (cfg->max_nfs != 0)
		return cfg->max_nfs;
	return (uint32_t)RTE_MIN(reserved + SQ_SPARE_NF_SLOTS, (uint64_t)1 << 20);
}

/* A scaled service's instances are shared by flows: a per-flow rule (an NF
 * of a pool per flow) has nothing to scale. */
static int
check_scaled(struct ctx *c)
{
	const struct sq_config *cfg = c->cfg;

	for (uint16_t s = 0; s < cfg->n_services; s++) {
		const struct sq_cfg_service *svc = &cfg->services[s];

		if (svc->scale.enabled && sq_config_service_pooled(cfg, s))
			return fail_line(c, (size_t)svc->scale.line, "services", "scale",
					 "service \"%s\" is per-flow (a pool of NFs, one per "
					 "flow): it cannot also scale",
					 svc->name);
	}
	return 0;
}

/* The private pool of an isolated NF holds as many mbufs as the NF may
 * hold (max_outstanding_pkts, at most both rings and a burst); its region
 * must fit the span each has (mgr/isolate.h: 256 MiB). */
#define ISO_MAX_BYTES (256ull << 20)

uint32_t
sq_config_iso_mbufs(const struct sq_cfg_service *svc)
{
	return RTE_MIN(svc->max_outstanding_pkts, 2 * svc->ring_slots + 64);
}

static int
check_isolated(struct ctx *c)
{
	const struct sq_config *cfg = c->cfg;

	for (uint16_t s = 0; s < cfg->n_services; s++) {
		const struct sq_cfg_service *svc = &cfg->services[s];
		uint64_t bytes;

		if (svc->sandbox != SQ_SANDBOX_ISOLATED)
			continue;
		if (sq_config_service_pooled(cfg, s))
			return fail_line(c, (size_t)svc->line, "services", "sandbox",
					 "service \"%s\" is per-flow (a pool of NFs, one per "
					 "flow): isolated NFs are shared instances",
					 svc->name);
		bytes = (uint64_t)sq_config_iso_mbufs(svc) * (cfg->mbuf_data_room + 256u) +
			16ull * svc->ring_slots + (1u << 16);
		if (bytes > ISO_MAX_BYTES)
			return fail_line(c, (size_t)svc->line, "services", "sandbox",
					 "service \"%s\": an isolated NF's private pool of %u "
					 "mbufs is over 256 MiB (lower ring_slots or "
					 "max_outstanding_pkts)",
					 svc->name, sq_config_iso_mbufs(svc));
	}
	return 0;
}

/* A direct chain's NFs trust each other's packets and fail together
 * (mgr/lane.h): shared NFs of services in no other chain, lanes of equal
 * instance counts that no scaler or pool changes, rss rules. */
static int
check_direct_chain(struct ctx *c, const struct sq_cfg_chain *ch, uint16_t idx)
{
	const struct sq_config *cfg = c->cfg;
	const struct sq_cfg_service *first = &cfg->services[ch->services[0]];
	char b[32];

	snprintf(b, sizeof(b), "chains[%u]", idx);
	if (ch->n_hops < 2)
		return fail_line(c, (size_t)ch->direct_line, b, "direct",
				 "a direct chain needs two hops or more");
	for (uint16_t h = 0; h < ch->n_hops; h++) {
		const struct sq_cfg_service *svc = &cfg->services[ch->services[h]];

		if (svc->sandbox == SQ_SANDBOX_ISOLATED)
			return fail_line(c, (size_t)ch->direct_line, b, "direct",
					 "service \"%s\" is isolated: an untrusted NF never hands "
					 "packets to another",
					 svc->name);
		if (svc->scale.enabled)
			return fail_line(c, (size_t)ch->direct_line, b, "direct",
					 "service \"%s\" scales: a direct chain's lanes are fixed",
					 svc->name);
		if (svc->instances != first->instances || svc->max_instances != svc->instances)
			return fail_line(
				c, (size_t)ch->direct_line, b, "direct",
				"service \"%s\" has %u instances (max_instances %u): every "
				"hop of a direct chain has the same count, fixed (%u)",
				svc->name, svc->instances, svc->max_instances, first->instances);
		for (uint16_t o = 0; o < cfg->n_chains; o++)
			for (uint16_t k = 0; o != idx && k < cfg->chains[o].n_hops; k++)
				if (cfg->chains[o].services[k] == ch->services[h])
					return fail_line(
						c, (size_t)ch->direct_line, b, "direct",
						"service \"%s\" is also in chain \"%s\": a direct "
						"chain's services are its own",
						svc->name, cfg->chains[o].name);
		for (uint16_t k = 0; k < h; k++)
			if (ch->services[k] == ch->services[h])
				return fail_line(c, (size_t)ch->direct_line, b, "direct",
						 "service \"%s\" is twice in the chain", svc->name);
	}
	for (uint16_t r = 0; r < cfg->n_rules; r++) {
		if (cfg->rules[r].chain != idx || cfg->rules[r].assign == SQ_ASSIGN_RSS)
			continue;
		snprintf(b, sizeof(b), "rules[%u]", r);
		return fail_line(c, (size_t)cfg->rules[r].line, b, "assign",
				 "chain \"%s\" is direct: its rules assign by rss (each lane "
				 "keeps a flow)",
				 ch->name);
	}
	return 0;
}

static int
check_direct(struct ctx *c)
{
	for (uint16_t i = 0; i < c->cfg->n_chains; i++) {
		int ret;

		if (!c->cfg->chains[i].direct)
			continue;
		ret = check_direct_chain(c, &c->cfg->chains[i], i);
		if (ret != 0)
			return ret;
	}
	return 0;
}

void
sq_config_derive(struct sq_config *cfg)
{
	for (uint16_t i = 0; i < cfg->n_chains; i++) {
		struct sq_cfg_chain *ch = &cfg->chains[i];

		ch->pinned = false;
		for (uint16_t h = 0; h < ch->n_hops; h++)
			ch->pinned = ch->pinned || cfg->services[ch->services[h]].scale.enabled;
	}
}

static int
parse_root(struct ctx *c, const yaml_node_t *root)
{
	yaml_node_t *v[TOP_N_KEYS];
	int ret;

	if (root == NULL)
		return fail_line(c, 1, "", NULL, "empty file, expected a mapping");
	ret = map_get(c, root, "", top_keys, TOP_N_KEYS,
		      REQ(TOP_PORTS) | REQ(TOP_SERVICES) | REQ(TOP_CHAINS) | REQ(TOP_RULES), v);
	if (ret == 0)
		ret = parse_manager(c, v[TOP_MANAGER]);
	if (ret == 0)
		ret = parse_ports(c, v[TOP_PORTS]);
	if (ret == 0)
		ret = parse_services(c, v[TOP_SERVICES]);
	if (ret == 0)
		ret = check_max_nfs(c);
	if (ret == 0)
		ret = parse_chains(c, v[TOP_CHAINS]);
	if (ret == 0)
		ret = parse_rules(c, v[TOP_RULES]);
	if (ret == 0)
		ret = parse_generator(c, v[TOP_GENERATOR]);
	if (ret == 0)
		ret = check_scaled(c);
	if (ret == 0)
		ret = check_isolated(c);
	if (ret == 0)
		ret = check_direct(c);
	if (ret == 0)
		sq_config_derive(c->cfg);
	return ret;
}

static int
parse_error(struct ctx *c, const yaml_parser_t *parser)
{
	if (parser->error == YAML_MEMORY_ERROR) {
		fail_line(c, 1, "", NULL, "out of memory");
		return -ENOMEM;
	}
	if (parser->context != NULL)
		return fail_line(c, parser->problem_mark.line + 1, "", NULL, "%s (%s at line %zu)",
				 parser->problem, parser->context, parser->context_mark.line + 1);
	return fail_line(c, parser->problem_mark.line + 1, "", NULL, "%s",
			 parser->problem != NULL ? parser->problem : "cannot parse YAML");
}

/* Read the first YAML document of the file; on success the caller deletes @p doc. */
static int
load_doc(struct ctx *c, yaml_document_t *doc)
{
	yaml_parser_t parser;
	struct stat st;
	FILE *f;
	int ret = 0;

	f = fopen(c->path, "rb");
	if (f != NULL && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		f = NULL;
		errno = EISDIR;
	}
	if (f == NULL) {
		if (c->err != NULL && c->err_len > 0)
			snprintf(c->err, c->err_len, "%s: cannot open: %s", c->path,
				 strerror(errno));
		return -ENOENT;
	}
	if (!yaml_parser_initialize(&parser)) {
		fail_line(c, 1, "", NULL, "out of memory");
		ret = -ENOMEM;
		goto out_close;
	}
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, doc))
		ret = parse_error(c, &parser);
	yaml_parser_delete(&parser);
out_close:
	fclose(f);
	return ret;
}

static void
set_defaults(struct sq_config *cfg)
{
	strcpy(cfg->name, "squall");
	cfg->region_mb = 256;
	cfg->mbufs = 16383;
	cfg->mbuf_data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
	cfg->stats_interval_ms = 1000;
	cfg->nf_core = -1;
	cfg->rx_burst = 32;
	cfg->max_flows = 65536;
	cfg->flow_idle_timeout_ms = 10000;
	cfg->flow_half_open_timeout_ms = 5000;
	cfg->flow_linger_ms = 200;
	cfg->core_wakes_per_s = 50000;
	cfg->idle_sleep_max_us = 1000;
	cfg->idle_after_us = 100;
	cfg->core_yield_rounds = 1;
	cfg->control_realtime = true;
	cfg->mgr_nice = 0;
	strcpy(cfg->nf_user, "squall-nf");
}

int
sq_config_load(const char *path, const char *nf_path, struct sq_config *cfg, char *err,
	       size_t err_len)
{
	struct ctx c = {
		.path = path,
		.nf_path = nf_path,
		.cfg = cfg,
		.err = err,
		.err_len = err_len,
	};
	yaml_document_t doc;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	set_defaults(cfg);
	if (err != NULL && err_len > 0)
		err[0] = '\0';
	if (strlen(path) >= sizeof(cfg->path)) {
		if (err != NULL && err_len > 0)
			snprintf(err, err_len, "%.64s...: path longer than %zu characters", path,
				 sizeof(cfg->path) - 1);
		return -EINVAL;
	}
	strcpy(cfg->path, path);
	ret = load_doc(&c, &doc);
	if (ret < 0)
		return ret;
	c.doc = &doc;
	ret = parse_root(&c, yaml_document_get_root_node(&doc));
	yaml_document_delete(&doc);
	if (ret < 0)
		sq_config_free(cfg);
	return ret;
}

void
sq_config_free(struct sq_config *cfg)
{
	unsigned int i, j;

	/* All of services[], not n_services: a failed load may stop mid-service. */
	for (i = 0; i < SQ_MAX_SERVICES; i++) {
		for (j = 0; j < SQ_MAX_NF_ARGS; j++) {
			free(cfg->services[i].args[j]);
			cfg->services[i].args[j] = NULL;
		}
		cfg->services[i].n_args = 0;
	}
}

int
sq_config_port_index(const struct sq_config *cfg, const char *name)
{
	int i;

	for (i = 0; i < cfg->n_ports; i++)
		if (strcmp(cfg->ports[i].name, name) == 0)
			return i;
	return -1;
}

int
sq_config_service_index(const struct sq_config *cfg, const char *name)
{
	int i;

	for (i = 0; i < cfg->n_services; i++)
		if (!cfg->services[i].draining && strcmp(cfg->services[i].name, name) == 0)
			return i;
	return -1;
}

int
sq_config_chain_index(const struct sq_config *cfg, const char *name)
{
	int i;

	for (i = 0; i < cfg->n_chains; i++)
		if (!cfg->chains[i].draining && strcmp(cfg->chains[i].name, name) == 0)
			return i;
	return -1;
}

bool
sq_config_service_pooled(const struct sq_config *cfg, uint16_t service)
{
	for (uint16_t r = 0; r < cfg->n_rules; r++) {
		const struct sq_cfg_chain *ch = &cfg->chains[cfg->rules[r].chain];

		if (cfg->rules[r].assign != SQ_ASSIGN_PER_FLOW)
			continue;
		for (uint16_t h = 0; h < ch->n_hops; h++)
			if (ch->services[h] == service)
				return true;
	}
	return false;
}
