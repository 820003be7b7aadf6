#!/bin/bash
#
# Every command of orchestrate(1) has help: `orchestrate CMD -h` exits 0 with a usage
# line naming the command on stdout and nothing on stderr, in both spellings
# (git's t0012-help.sh).  Plus the top-level -h, --version, and an unknown
# command (exit 64).

test_description='help and usage of every command'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate

# Every command of the command table (each is a `.name = "..."` entry of a
# struct command in orchestrate/cli/), so that a new command is checked
# without anyone listing it here.
commands=$(sed -n 's/^[[:space:]]*\.name = "\([a-z_]*\)".*/\1/p' "$REPO_ROOT"/orchestrate/cli/*.c | sort -u)

test_expect_success 'the command table is found (28 commands or more)' '
	test $(echo "$commands" | wc -w) -ge 28
'

for cmd in $commands; do
	hyphen=$(echo "$cmd" | tr _ -)
	test_expect_success "$cmd -h prints its usage" "
		orch $cmd -h >out 2>err &&
		test_must_be_empty err &&
		grep -i '^usage:.*$cmd' out
	"
	test_expect_success "$cmd --help prints its usage" "
		orch $cmd --help >out 2>err &&
		test_must_be_empty err &&
		grep -i 'usage:.*$cmd' out
	"
	if test "$hyphen" != "$cmd"; then
		test_expect_success "$hyphen -h (hyphenated spelling) prints its usage" "
			orch $hyphen -h >out 2>err &&
			test_must_be_empty err &&
			grep -i -e 'usage:.*$cmd' -e 'usage:.*$hyphen' out
		"
	fi
done

test_expect_success 'orchestrate -h prints a usage and lists every command' '
	orch -h >out 2>err &&
	test_must_be_empty err &&
	grep -i "usage:" out &&
	for cmd in $commands; do
		grep -w -e "$cmd" out || { echo "missing $cmd in -h"; exit 1; }
	done
'

test_expect_success 'orchestrate --help works like -h' '
	orch --help >out 2>err &&
	test_must_be_empty err &&
	grep -i "usage:" out
'

test_expect_success 'help works without the config file ever being needed for etcd' '
	ORCHESTRATE_ETCD=$(dead_url) orch current_version -h >out 2>err &&
	test_must_be_empty err &&
	grep -i "usage:.*current_version" out
'

test_expect_success 'unknown command exits 64 with a one-line message naming it' '
	test_expect_code 64 orch no_such_command >out 2>err &&
	test_must_be_empty out &&
	test_one_line err &&
	grep no_such_command err
'

test_expect_success 'unknown hyphenated command exits 64' '
	test_expect_code 64 orch no-such-command 2>err &&
	grep no-such-command err
'

test_expect_success 'no command at all is a usage error (64)' '
	test_expect_code 64 orch >out 2>err &&
	test -s err
'

test_expect_success 'unknown global option exits 64' '
	test_expect_code 64 orch --no-such-option current_version 2>err &&
	grep -e "no-such-option" err
'

test_expect_success 'unknown command option exits 64' '
	test_expect_code 64 orch current_version --no-such-option 2>err &&
	grep -e "no-such-option" err
'

test_expect_success '--version prints a version and exits 0' '
	orch --version >out 2>err &&
	test_must_be_empty err &&
	test_one_line out &&
	grep "[0-9]" out
'

test_expect_success '--version needs no etcd' '
	ORCHESTRATE_ETCD=$(dead_url) orch --version >out &&
	grep "[0-9]" out
'

if test -f "$REPO_ROOT/bin/orchestrated"; then
	test_expect_success 'orchestrated -h prints its usage' '
		orchestrated -h >out 2>err &&
		test_must_be_empty err &&
		grep -i "usage:.*orchestrated" out
	'
	test_expect_success 'orchestrated --version' '
		orchestrated --version >out 2>err &&
		grep "[0-9]" out
	'
	# orchestrate said 0.1.0 and orchestrated 0.1: now both say the Makefile'"'"'s
	# VERSION, and so do the man pages.
	test_expect_success 'one version: both programs and the man pages say the Makefile'"'"'s' '
		v=$(make -s -C "$REPO_ROOT" print-version) &&
		test -n "$v" &&
		echo "orchestrate $v" >expect &&
		orch --version >actual &&
		test_cmp expect actual &&
		echo "orchestrated $v" >expect &&
		orchestrated --version >actual &&
		test_cmp expect actual &&
		for m in orchestrate.1 orchestrate.conf.5 orchestrated.8; do
			grep -x ".Os orchestrate $v" "$REPO_ROOT/man/$m" ||
				{ echo "man/$m does not say $v" >&4; exit 1; }
		done
	'
	test_expect_success 'orchestrated with an unknown option exits 64' '
		test_expect_code 64 orchestrated --no-such-option 2>err &&
		test -s err
	'
fi

test_done
