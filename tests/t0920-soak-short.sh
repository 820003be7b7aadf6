#!/bin/bash
#
# A short soak (bench/soak.sh has the long one): 8 daemons for 20 s of triggers,
# catalog churn and pauses.  No daemon may die, the fleet must converge on the
# last version, and no daemon may grow by 2 MiB or more of VmRSS (measured warm,
# after its first sync and run).

test_description='short soak: daemons survive churn and stay flat in memory'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
test_have_orchestrated
start_etcd
# Under AddressSanitizer freed memory sits in a quarantine of up to 256 MiB:
# RSS says nothing about leaks there (the ASan run checks leaks itself).
max_growth=2048
grep -qa __asan_init "$REPO_ROOT/bin/orchestrated" && max_growth=

test_expect_success '8 daemons, 20 s of triggers and catalog changes: none died, RSS flat (< 2 MiB)' '
	SOAK_ETCD=$ETCD_URL DAEMONS=8 SOAK_SECONDS=20 MAX_GROWTH_KIB=$max_growth \
		"$REPO_ROOT/bench/soak.sh" >soak.out 2>&1 || { cat soak.out >&4; exit 1; }
	grep -q "dead: 0, converged on soak[0-9]*: yes" soak.out &&
	grep -q "VmRSS growth per daemon" soak.out
'

# The numbers, as TAP comments.
test -f soak.out && grep -E "^(daemons|VmRSS)" soak.out | say_comment
test_done
