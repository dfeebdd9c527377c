/* SPDX-License-Identifier: BSD-3-Clause
 * uids: two managers never hold one range of NF uids; a range comes free
 * when its holder lets go (or dies: the kernel drops its lock).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "uids.h"

#include "check.h"

int
main(void)
{
	char dir[] = "/tmp/squall-uids-XXXXXX", err[256];
	struct mgr_uids a, b, c;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(mgr_uids_claim(&a, dir, err, sizeof(err)) == 0);
	CHECK(mgr_uids_claim(&b, dir, err, sizeof(err)) == 0);
	CHECK(a.index >= 0 && b.index >= 0 && a.index != b.index);
	/* no NF uid of one is the other's */
	CHECK(mgr_uids_of(&a, MGR_UIDS_SPAN - 1) < mgr_uids_of(&b, 0) ||
	      mgr_uids_of(&b, MGR_UIDS_SPAN - 1) < mgr_uids_of(&a, 0));
	CHECK(mgr_uids_of(&a, 0) >= MGR_UIDS_FIRST);
	mgr_uids_release(&a);
	CHECK(a.index == -1);
	CHECK(mgr_uids_claim(&c, dir, err, sizeof(err)) == 0);
	CHECK(c.index != b.index);
	mgr_uids_release(&b);
	mgr_uids_release(&c);
	/* a lock directory it cannot make: said */
	CHECK(mgr_uids_claim(&a, "/proc/no/such", err, sizeof(err)) < 0 && err[0] != '\0');
	for (unsigned int k = 0; k < MGR_UIDS_RANGES; k++) {
		char path[300];

		snprintf(path, sizeof(path), "%s/%u", dir, k);
		unlink(path);
	}
	rmdir(dir);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
