/* SPDX-License-Identifier: BSD-3-Clause
 * capfilter: libpcap compiles the expression to classic BPF, DPDK's
 * rte_bpf_convert makes that eBPF, rte_bpf_load checks and loads it, and
 * squall-mgr runs it JIT-compiled. Three things of DPDK 22.11 go wrong on
 * the way, so the converted program is rewritten (fix_program) before it is
 * loaded:
 *
 * 1. ld/ldb [x + k] read [A + k]. The converter (lib/bpf/bpf_convert.c,
 *    bpf_convert_filter) maps the indirect loads BPF_LD|BPF_IND|size with
 *    the ALU instructions, giving them src_reg X only if BPF_SRC(code) ==
 *    BPF_X. In a load, bit 0x08 is no source bit but part of the size:
 *    BPF_H is 0x08, BPF_W 0x00, BPF_B 0x10. So ldh [x + k] gets X by chance,
 *    while ld [x + k] and ldb [x + k] get src_reg 0, which the converter
 *    maps to A (R0), and the interpreter and the JIT take the index from
 *    src_reg. libpcap emits ldxb 4*([14]&0xf) then ldb [x + k] for a byte
 *    past the IPv4 header (tcp[13], icmp[0], tcp[tcpflags]): A then holds
 *    ldh [20], the IPv4 flags and fragment offset, so the load read byte k
 *    of the frame, or past its end with DF set, and matched nothing. "udp
 *    port 53" (ldh [x + k]) and ip[20] (ldb [k]) were right. Fix: every
 *    indirect load's src_reg is X (what [x + k] says; a converter that sets
 *    it itself is unchanged).
 *
 * 2. jset #k with -128 <= k <= 127 (tcp[13] & 2) is encoded wrong by the x86
 *    JIT (lib/bpf/bpf_jit_x86.c, emit_tst_imm): it writes TEST r/m64 (F7 /0)
 *    with a one-byte immediate where that opcode takes four bytes, so the CPU
 *    takes the first three bytes of the jump after it as the rest of the mask
 *    and runs on from the middle of an instruction: a wrong verdict or a
 *    crash (SIGSEGV on any TCP frame that reached it in the unit test). Fix:
 *    such a jset becomes "mov R9, k; jset A, R9" (the JIT encodes TEST r64,
 *    r64 right). A k past int8 gets the four-byte immediate, and the
 *    converter itself turns a negative k into a register.
 *
 * 3. Offsets near 2^32 wrap. The interpreter adds X + k in 32 bits, the JIT
 *    in 64 and hands rte_pktmbuf_read a 32-bit offset, whose bounds check
 *    (off + len against the length) is 32-bit too. So where libpcap's filter
 *    refuses a load (it returns 0), DPDK's read a byte inside the frame or
 *    4 GiB past it (SIGSEGV in the unit test): "ether[len - 1]" on an empty
 *    frame, or an X taken from the packet ("ether[ip[16:4] - c]"). And
 *    rte_bpf_load refused an absolute load of k >= 2^31 ("ether[0x80000000]"),
 *    which libpcap takes. Fix: a load of k >= 2^31 returns 0 (libpcap's
 *    answer on any frame shorter than 2 GiB), and an indirect load first
 *    returns 0 if X > 2^31 - 5, so that X + k + 4 < 2^32 for a load that
 *    runs.
 *
 * Every load class, these masks and such offsets are run against libpcap's
 * own filter by tests/unit/test_capfilter.c, through the interpreter and the
 * JIT, on every prefix of each frame.
 */
/* rte_bpf_convert is experimental in 22.11; this file alone uses it. */
#define ALLOW_EXPERIMENTAL_API
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <pcap/pcap.h>

#include <rte_bpf.h>
#include <rte_errno.h>
#include <rte_malloc.h>

#include "capfilter.h"

#define MASK_REG EBPF_REG_9 /* fix 2's register: no converted program uses it */
#define X_MAX    0x7ffffffb /* fix 3: 2^31 - 5 */

int
capfilter_compile(const char *expr, uint32_t snaplen, struct bpf_program *prog, char *err,
		  size_t err_len)
{
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, (int)snaplen);

	if (dead == NULL) {
		snprintf(err, err_len, "libpcap: pcap_open_dead failed");
		return -1;
	}
	if (pcap_compile(dead, prog, expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
		snprintf(err, err_len, "filter: %s", pcap_geterr(dead));
		pcap_close(dead);
		return -1;
	}
	pcap_close(dead);
	return 0;
}

/* A jset the x86 JIT encodes wrong (fix 2): the one-byte immediates. */
static bool
jset_short_k(const struct ebpf_insn *ins)
{
	return ins->code == (BPF_JMP | BPF_JSET | BPF_K) && ins->imm == (int8_t)ins->imm;
}

static bool
is_load(const struct ebpf_insn *ins, uint8_t mode)
{
	return BPF_CLASS(ins->code) == BPF_LD && BPF_MODE(ins->code) == mode;
}

/* Fix 3: a load of k >= 2^31, which returns 0. */
static bool
k_past_2g(const struct ebpf_insn *ins)
{
	return (is_load(ins, BPF_ABS) || is_load(ins, BPF_IND)) && ins->imm < 0;
}

/* How many instructions @p ins becomes: a check and the load (fix 3), a mov
 * and the jset (fix 2), or itself. */
static uint32_t
grown(const struct ebpf_insn *ins)
{
	return is_load(ins, BPF_IND) || k_past_2g(ins) || jset_short_k(ins) ? 2 : 1;
}

/* Point jump @p o of program @p prog at instruction @p to. @return false
 * if it cannot reach. */
static bool
aim(struct ebpf_insn *o, const struct ebpf_insn *prog, int64_t to)
{
	int64_t off = to - (o - prog + 1);

	o->off = (int16_t)off;
	return off >= INT16_MIN && off <= INT16_MAX;
}

/* The converter's program @p in (@p n instructions) with the three fixes
 * (see the file comment), in @p *out (malloc'd, *@p n_out instructions),
 * ending in "fail: mov A, 0; exit" if fix 3 jumps there. X is the register
 * the converter's prologue clears second ("xor A, A; xor X, X; mov R6,
 * R1"); a program not so, or that uses R9 or jumps out of itself, is
 * refused rather than guessed at. @return 0, or -1. */
static int
fix_program(const struct ebpf_insn *in, uint32_t n, struct ebpf_insn **out, uint32_t *n_out)
{
	const uint8_t xor = EBPF_ALU64 | BPF_XOR | BPF_X;
	uint32_t *at, fail = 0; /* at[i]: where in[i] (and what it became) starts */
	struct ebpf_insn *prog = NULL, *o;
	bool uses_fail = false;
	uint8_t x;
	int rc = -1;

	*out = NULL;
	if (n < 3 || in[0].code != xor || in[0].dst_reg != EBPF_REG_0 ||
	    in[0].src_reg != EBPF_REG_0 || in[1].code != xor || in[1].dst_reg != in[1].src_reg ||
	    in[1].dst_reg == EBPF_REG_0)
		return -1;
	x = in[1].dst_reg;
	at = malloc(n * sizeof(*at));
	if (at == NULL)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (in[i].dst_reg == MASK_REG || in[i].src_reg == MASK_REG)
			goto out;
		at[i] = fail;
		fail += grown(&in[i]);
		uses_fail |= is_load(&in[i], BPF_IND) || k_past_2g(&in[i]);
	}
	prog = o = calloc(fail + 2, sizeof(*o));
	if (prog == NULL)
		goto out;
	for (uint32_t i = 0; i < n; i++, o++) {
		int64_t to = (int64_t)i + 1 + in[i].off;

		*o = in[i];
		if (is_load(o, BPF_IND) || k_past_2g(o)) {
			/* fix 3: "jgt X, X_MAX, fail" before an indirect load. A
			 * load of k >= 2^31 becomes "jge X, 0, fail" (always
			 * taken) and a "mov A, 0" that never runs: the validator
			 * refuses code that no jump reaches. */
			bool never = k_past_2g(o);

			*o = (struct ebpf_insn){.code = BPF_JMP | (never ? BPF_JGE : BPF_JGT) |
							BPF_K,
						.dst_reg = x,
						.imm = never ? 0 : X_MAX};
			if (!aim(o++, prog, fail))
				goto out;
			*o = in[i];
			o->src_reg = x; /* fix 1 */
			if (never)
				*o = (struct ebpf_insn){.code = BPF_ALU | EBPF_MOV | BPF_K};
			continue;
		}
		if (jset_short_k(&in[i])) {
			/* fix 2: mov R9, k (64 bits, sign-extended like the
			 * jset's k); jset A, R9 */
			*o++ = (struct ebpf_insn){.code = EBPF_ALU64 | EBPF_MOV | BPF_K,
						  .dst_reg = MASK_REG,
						  .imm = in[i].imm};
			*o = in[i];
			o->code = BPF_JMP | BPF_JSET | BPF_X;
			o->src_reg = MASK_REG;
			o->imm = 0;
		}
		if (BPF_CLASS(o->code) != BPF_JMP || BPF_OP(o->code) == EBPF_CALL ||
		    BPF_OP(o->code) == EBPF_EXIT)
			continue;
		if (to < 0 || to >= n || !aim(o, prog, at[to]))
			goto out;
	}
	/* the validator refuses code no jump reaches */
	if (uses_fail) {
		*o++ = (struct ebpf_insn){.code = BPF_ALU | EBPF_MOV | BPF_K,
					  .dst_reg = EBPF_REG_0};
		*o++ = (struct ebpf_insn){.code = BPF_JMP | EBPF_EXIT};
	}
	*out = prog;
	*n_out = o - prog;
	rc = 0;
out:
	free(at);
	if (rc != 0)
		free(prog);
	return rc;
}

struct rte_bpf *
capfilter_load(const struct bpf_program *prog, char *err, size_t err_len)
{
	struct rte_bpf_prm *prm = rte_bpf_convert(prog), fixed;
	struct ebpf_insn *ins;
	struct rte_bpf *bpf;

	if (prm == NULL) {
		snprintf(err, err_len, "filter: rte_bpf_convert: %s", rte_strerror(rte_errno));
		return NULL;
	}
	fixed = *prm;
	if (fix_program(prm->ins, prm->nb_ins, &ins, &fixed.nb_ins) != 0) {
		snprintf(err, err_len, "filter: rte_bpf_convert made a program of unknown layout");
		rte_free(prm);
		return NULL;
	}
	fixed.ins = ins;
	bpf = rte_bpf_load(&fixed); /* a copy of ins */
	free(ins);
	rte_free(prm);
	if (bpf == NULL)
		snprintf(err, err_len, "filter: rte_bpf_load: %s", rte_strerror(rte_errno));
	return bpf;
}
