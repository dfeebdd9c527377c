/* SPDX-License-Identifier: BSD-3-Clause
 * EAL for a unit test that needs DPDK's allocator or a mempool: no
 * hugepages, no shared config, no PCI, no telemetry; one lcore, on a CPU
 * this process may run on.
 */
#ifndef SQUALL_TESTS_EAL_NOHUGE_H
#define SQUALL_TESTS_EAL_NOHUGE_H

#include <sched.h>
#include <stdio.h>

#include <rte_common.h>
#include <rte_eal.h>

/* @return rte_eal_init()'s result. */
static inline int
eal_nohuge_init(char *prog)
{
	static char lcores[32];
	cpu_set_t cpus;
	int cpu = 0;

	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
		while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &cpus))
			cpu++;
	snprintf(lcores, sizeof(lcores), "0@%d", cpu);
	char *eal[] = {prog, "--lcores",    lcores,     "--no-huge",      "-m",
		       "16", "--no-shconf", "--no-pci", "--no-telemetry", "--log-level=error"};
	return rte_eal_init(RTE_DIM(eal), eal);
}

#endif /* SQUALL_TESTS_EAL_NOHUGE_H */
