/* SPDX-License-Identifier: BSD-3-Clause
 * Messages (msg.c): the manager's end of each NF's two message rings (seed
 * 003 §IV.B). Any thread may send; the main lcore takes what NFs sent.
 */
#ifndef SQUALL_MGR_MSG_H
#define SQUALL_MGR_MSG_H

#include <stdint.h>

struct mgr;
struct mgr_nf;
struct rte_tel_data;

int mgr_msg_init(struct mgr *mgr);
void mgr_msg_free(struct mgr *mgr);

/* Before an NF's process starts (first start, scale-out, restart): its
 * rings start empty at the manager's own counts; what was sent to the last
 * process of the slot and never taken is dropped, counted as undelivered. */
void mgr_msg_nf_starting(struct mgr *mgr, struct mgr_nf *nf);

/*
 * Post a message to @p nf and wake it if it sleeps (at once on the main
 * lcore, else at the main lcore's next mgr_msg_poll()).
 * @return 0; -EINVAL: len above SQ_MSG_DATA_LEN; -ESRCH: no process;
 *   -ENOBUFS: its ring is full (the NF does not take them); -EPROTO: its
 *   consumer count makes no sense (a lying NF: counted, never trusted).
 */
int mgr_msg_send(struct mgr *mgr, struct mgr_nf *nf, uint32_t type, const void *data, uint32_t len);

/* Main lcore, every control period: take what NFs sent (those whose bit is
 * set in the msg-ready bitmap), and wake NFs other threads sent to. */
void mgr_msg_poll(struct mgr *mgr);

/* The last acknowledgement @p nf_id sent: SQ_MSG_BLOCKED, SQ_MSG_RUNNING,
 * or 0 for none since its process started. */
uint32_t mgr_msg_acked(const struct mgr *mgr, uint32_t nf_id);

/* Telemetry (registered by telemetry.c under its guard and the control
 * lock): /squall/msgs[,SEQ] and /squall/msg_send,SERVICE,INSTANCE,TYPE[,HEX]. */
int mgr_msg_tel_list(const char *cmd, const char *params, struct rte_tel_data *d);
int mgr_msg_tel_send(const char *cmd, const char *params, struct rte_tel_data *d);

#endif
