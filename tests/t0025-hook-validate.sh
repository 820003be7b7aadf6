#!/bin/sh
test_description='the shipped validate hook: its directory, its checks, the warning when none ran'
. "$(dirname "$0")/test-lib.sh"

# The hook as make install writes it for a prefix whose LIBEXECDIR is
# $TRASH/lib (the same substitution as the Makefile's install target).
mkdir -p lib/hooks lib/validation.d
sed "s|@libexecdir@|$TRASH/lib|g" "$REPO_ROOT/hooks/validate" >lib/hooks/validate
chmod +x lib/hooks/validate

run_validate () {
	env -i PATH=/usr/bin:/bin "$TRASH/lib/hooks/validate"
}

test_expect_success 'the Makefile substitutes the prefix into the hook' '
	grep -q "^VALIDATION_DIR=@libexecdir@/validation.d\$" "$REPO_ROOT/hooks/validate" &&
	grep -q "s|@libexecdir@|\$(libexecdir)|g. hooks/validate" "$REPO_ROOT/Makefile" &&
	grep -q "^VALIDATION_DIR=$TRASH/lib/validation.d\$" lib/hooks/validate
'

test_expect_success 'no check: passes, and warns in its output' '
	run_validate >out &&
	grep -q "^validation: warning: no check in $TRASH/lib/validation.d: nothing was validated\$" out &&
	grep -q "^validation: 0 check(s), 0 failed\$" out
'

test_expect_success 'only leftovers and non-executables: still no check' '
	printf "#!/bin/sh\nexit 1\n" >lib/validation.d/a.dpkg-old &&
	printf "#!/bin/sh\nexit 1\n" >lib/validation.d/b~ &&
	printf "#!/bin/sh\nexit 1\n" >lib/validation.d/not-executable &&
	chmod +x lib/validation.d/a.dpkg-old lib/validation.d/b~ &&
	run_validate >out &&
	grep -q "warning: no check" out
'

test_expect_success 'checks run in name order; one failing fails the hook and is named' '
	printf "#!/bin/sh\necho first\n" >lib/validation.d/10-first &&
	printf "#!/bin/sh\necho second; exit 3\n" >lib/validation.d/20-second &&
	printf "#!/bin/sh\necho third\n" >lib/validation.d/30-third &&
	chmod +x lib/validation.d/10-first lib/validation.d/20-second lib/validation.d/30-third &&
	test_expect_code 1 run_validate >out &&
	! grep -q "warning" out &&
	grep -n . out >numbered &&
	grep -q "^1:first\$" numbered &&
	grep -q "validation: FAILED (exit 3): 20-second" out &&
	grep -q "validation: ok: 30-third" out &&
	grep -q "^validation: 3 check(s), 1 failed\$" out
'

test_expect_success 'all checks pass: exit 0, no warning' '
	rm lib/validation.d/20-second &&
	run_validate >out &&
	! grep -q "warning" out &&
	grep -q "^validation: 2 check(s), 0 failed\$" out
'

test_done
