# orchestrate — a plain Makefile (git, Redis and OpenBSD style).
#
#   make                      build orchestrate and orchestrated
#   make check                unit tests, then integration tests against a real etcd
#   make check SANITIZE=address,undefined
#   make bench                benchmark against etcdctl and curl (prints numbers)
#   make install DESTDIR=... PREFIX=...
#
# DEVELOPER=1 (the default here, and in CI) turns warnings into errors; packagers
# may build with DEVELOPER= to keep warnings as warnings.

# The one place the release is named: both programs print it (version.h) and
# the man pages say it (.Os; t0010-help.sh checks that they agree).
VERSION = 0.1.0

PREFIX ?= /usr/local
prefix ?= $(PREFIX)
bindir ?= $(prefix)/bin
sbindir ?= $(prefix)/sbin
mandir ?= $(prefix)/share/man
libexecdir ?= $(prefix)/lib/orchestrate
datadir ?= $(prefix)/share
sysconfdir ?= /etc
localstatedir ?= /var
unitdir ?= $(prefix)/lib/systemd/system
sysusersdir ?= $(prefix)/lib/sysusers.d
# Debian's Puppet looks in /usr/share/puppet/modules: with PREFIX=/usr the
# module needs no link.
puppetmoduledir ?= $(datadir)/puppet/modules/orchestrate
# The Prometheus alert rules and their unit tests, for a Prometheus server's
# rule_files to name as they are.
prometheusdir ?= $(datadir)/orchestrate/prometheus

PKG_CONFIG ?= pkg-config
CC ?= cc
DEVELOPER ?= 1
SANITIZE ?=
V ?=

PKGS = libcurl libcjson yaml-0.1 libsystemd
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS))

WARNINGS = -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -Wno-unused-parameter
ifeq ($(DEVELOPER),1)
WARNINGS += -Werror
endif

CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARNINGS) -Iinclude $(PKG_CFLAGS) \
	-DLIBEXECDIR='"$(libexecdir)"' -DORCHESTRATE_VERSION='"$(VERSION)"' $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(LDFLAGS)
ifneq ($(SANITIZE),)
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=$(SANITIZE)
endif

ifeq ($(V),)
QUIET_CC = @echo '   ' CC $@;
QUIET_LINK = @echo '   ' LINK $@;
endif

# The library every program links: base, etcd client, fleet (the key layout and
# the operations), output, config, and the hook runner's protocol; grouped by
# folder in the order README.md's "Layout" lists them.  The order is for the
# reader, not the linker: an archive's index finds a symbol wherever it is.
LIB_OBJS = \
	orchestrate/base/buf.o \
	orchestrate/base/log.o \
	orchestrate/base/base64.o \
	orchestrate/base/strv.o \
	orchestrate/base/clock.o \
	orchestrate/base/fileio.o \
	orchestrate/base/address.o \
	orchestrate/base/utf8.o \
	orchestrate/base/backoff.o \
	orchestrate/base/json.o \
	orchestrate/base/array.o \
	orchestrate/etcd/etcd.o \
	orchestrate/etcd/etcd_watch.o \
	orchestrate/etcd/etcd_call.o \
	orchestrate/etcd/etcd_keepalive.o \
	orchestrate/fleet/schema.o \
	orchestrate/fleet/fleet.o \
	orchestrate/fleet/fleet_codec.o \
	orchestrate/fleet/fleet_view.o \
	orchestrate/fleet/fleet_batch.o \
	orchestrate/fleet/fleet_cli.o \
	orchestrate/fleet/fleet_identity.o \
	orchestrate/fleet/fleet_lease.o \
	orchestrate/fleet/fleet_stream.o \
	orchestrate/fleet/fleet_model.o \
	orchestrate/fleet/fleet_facts.o \
	orchestrate/fleet/fleet_queue.o \
	orchestrate/fleet/fleet_events.o \
	orchestrate/fleet/fleet_plan.o \
	orchestrate/fleet/fleet_rollout.o \
	orchestrate/fleet/fleet_wait.o \
	orchestrate/fleet/catalog.o \
	orchestrate/output/hiera.o \
	orchestrate/output/render.o \
	orchestrate/output/render_commands.o \
	orchestrate/output/metrics.o \
	orchestrate/output/metrics_fleet.o \
	orchestrate/output/render_events.o \
	orchestrate/output/render_plan.o \
	orchestrate/config/config.o \
	orchestrate/config/options.o \
	orchestrate/config/netif.o \
	orchestrate/config/local.o \
	orchestrate/hook/hook_proto.o

CLI_OBJS = \
	orchestrate/cli/cli.o \
	orchestrate/cli/cmd_versions.o \
	orchestrate/cli/cmd_status.o \
	orchestrate/cli/cmd_events.o \
	orchestrate/cli/cmd_services.o \
	orchestrate/cli/cmd_admin.o \
	orchestrate/cli/cmd_history.o \
	orchestrate/cli/cmd_plan.o \
	orchestrate/cli/cmd_identity.o

DAEMON_OBJS = \
	orchestrate/node/orchestrated.o \
	orchestrate/node/node.o \
	orchestrate/node/node_lease.o \
	orchestrate/node/node_sync.o \
	orchestrate/node/node_catalog.o \
	orchestrate/node/node_rollout.o \
	orchestrate/node/node_queue.o \
	orchestrate/node/node_facts.o \
	orchestrate/node/node_run.o \
	orchestrate/node/node_write.o \
	orchestrate/node/node_pace.o \
	orchestrate/hook/hook.o

# Drivers that a shell test runs against the etcd it started (not by prove).
ETCD_DRIVERS = tests/unit/test_etcd_settle tests/unit/test_etcd_snapshot \
	tests/unit/test_etcd_watch_create tests/unit/test_etcd_watch_part

# Every other tests/unit/test_*.c is a unit test that prove runs: a new one
# needs no line here.
UNIT_TESTS = $(filter-out $(ETCD_DRIVERS),$(patsubst %.c,%,$(wildcard tests/unit/test_*.c)))

# The binaries go to bin/: orchestrate/ is the source folder, and a file cannot
# share its name at the top of the tree.
PROGRAMS = bin/orchestrate bin/orchestrated bin/orchestrate-hook-runner

# The root side of the hooks (orchestrated(8) "HOOK RUNNER"): it runs them
# with the daemon's own hook.c.
RUNNER_OBJS = orchestrate/hook/hook_runner.o orchestrate/hook/hook.o

all: $(PROGRAMS)

liborchestrate.a: $(LIB_OBJS)
	$(QUIET_LINK)$(AR) rcs $@ $^

bin/orchestrate: $(CLI_OBJS) liborchestrate.a
	@mkdir -p bin
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJS) liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

bin/orchestrated: $(DAEMON_OBJS) liborchestrate.a
	@mkdir -p bin
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) -o $@ $(DAEMON_OBJS) liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

bin/orchestrate-hook-runner: $(RUNNER_OBJS) liborchestrate.a
	@mkdir -p bin
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) -o $@ $(RUNNER_OBJS) liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

# Objects depend on the flags they were built with (git's GIT-CFLAGS): a
# different PREFIX (the hooks' default paths) or SANITIZE rebuilds them, so
# `make install PREFIX=/usr` never installs binaries built for /usr/local.
BUILD_FLAGS = .build-flags
$(BUILD_FLAGS): FORCE
	@echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' >$@

# Each compile writes the headers it read to a .d file beside its output
# (-MMD; -MP adds a target for each header, so that a header removed is no
# error), and make reads them back: an object depends on exactly the headers
# it includes, internal ones (etcd_internal.h, cli.h, node_internal.h)
# included.  A first build has no .d files and needs none: everything is
# built anyway.
DEPFLAGS = -MMD -MP

%.o: %.c Makefile $(BUILD_FLAGS)
	$(QUIET_CC)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c -o $@ $<

tests/unit/%: tests/unit/%.c liborchestrate.a
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit -o $@ $< liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

# The snapshot driver writes from a second thread while it reads.
tests/unit/test_etcd_snapshot: tests/unit/test_etcd_snapshot.c liborchestrate.a
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit -pthread -o $@ $< liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

# The hook runner is daemon code, not in the library: its driver links it.
tests/unit/test_hook: tests/unit/test_hook.c orchestrate/hook/hook.o liborchestrate.a
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit -o $@ $< orchestrate/hook/hook.o liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

# The test runner is prove (TAP): unit drivers first, then the numbered shell
# scripts, each of which starts its own etcd on free loopback ports; then the
# alert rules (check-rules).
check: all $(UNIT_TESTS) $(ETCD_DRIVERS)
	prove -v $(UNIT_TESTS) tests/t[0-9]*.sh
	@$(MAKE) --no-print-directory check-rules

# The alert rules of contrib/prometheus/ (README.md, "Fleet metrics and
# alerts"): every series they use is one `status --prometheus` writes (its
# renderer's names; tests/t0770 checks them against a real exposition too),
# then promtool's check and unit tests.  Without promtool (a developer's
# machine) the promtool part is skipped, saying so; CI installs it
# (scripts/install-deps.sh), and REQUIRE_PROMTOOL=1 (.ci/run) makes its
# absence an error.
RULES_DIR = contrib/prometheus
check-rules:
	scripts/check-rules-series $(RULES_DIR)/orchestrate.rules.yml \
		$(RULES_DIR)/orchestrate.rules.test.yml --source orchestrate/output/metrics_fleet.c
	@if command -v promtool >/dev/null 2>&1; then \
		echo "promtool check rules $(RULES_DIR)/orchestrate.rules.yml" && \
		promtool check rules $(RULES_DIR)/orchestrate.rules.yml && \
		echo "promtool test rules $(RULES_DIR)/orchestrate.rules.test.yml" && \
		(cd $(RULES_DIR) && promtool test rules orchestrate.rules.test.yml); \
	elif [ "$(REQUIRE_PROMTOOL)" = 1 ]; then \
		echo "check-rules: promtool is not installed (REQUIRE_PROMTOOL=1)" >&2; exit 1; \
	else \
		echo "check-rules: SKIPPED promtool check/test rules: promtool is not installed" \
			"(Debian: apt-get install --no-install-recommends prometheus)"; \
	fi

# The layers of the tree (README.md, "Layout"): what each folder may include
# and call, and which node file owns which part of struct node.
check-layers:
	scripts/check-layers

check-unit: $(UNIT_TESTS)
	prove $(UNIT_TESTS)

bench: all
	bench/bench.sh

# What starting a hook costs the daemon: fork+execve against posix_spawn from a
# parent with 64 MiB resident (bench/spawn_cost.c; SPAWN_ARGS="-m 256 -w 8").
bench/out.spawn_cost: bench/spawn_cost.c Makefile $(BUILD_FLAGS)
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) -o $@ $< $(ALL_LDFLAGS)

bench-spawn: bench/out.spawn_cost
	bench/out.spawn_cost $(SPAWN_ARGS)

# A private etcd on loopback and three daemons converging on two versions.
demo: all
	demo/demo.sh

lint-man:
	mandoc -Tlint -Wwarning man/*.[158]

print-version:
	@echo $(VERSION)

# libFuzzer targets (tests/fuzz/*.c) over the decoders of what comes from outside:
# gateway replies, watch frames, the config file, names and service values.  The
# library is built again with clang and the sanitizers into tests/fuzz/build/;
# each fuzzer runs FUZZ_SECONDS from its committed seed corpus (new inputs go to
# tests/fuzz/build/, never into the corpus) and make fails on the first crash,
# leak, timeout or out-of-memory, leaving the input in tests/fuzz/build/.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZERS = fuzz_range fuzz_watch_frame fuzz_config fuzz_names fuzz_hook_request fuzz_codec
FUZZ_BUILD = tests/fuzz/build
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# clang does not see that a va_list format comes from a format-checked caller.
FUZZ_CFLAGS = -std=gnu11 $(WARNINGS) -Wno-format-nonliteral -Iinclude $(PKG_CFLAGS) -DLIBEXECDIR='"$(libexecdir)"' \
	-DORCHESTRATE_VERSION='"$(VERSION)"' \
	-g -O1 $(FUZZ_SAN)
FUZZ_LIB_OBJS = $(patsubst orchestrate/%.o,$(FUZZ_BUILD)/%.o,$(LIB_OBJS))

$(FUZZ_BUILD)/%.o: orchestrate/%.c Makefile
	@mkdir -p $(dir $@)
	$(QUIET_CC)$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJS)
	$(QUIET_LINK)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJS) $(PKG_LIBS)

fuzz-build: $(addprefix $(FUZZ_BUILD)/,$(FUZZERS))
.SECONDARY: $(FUZZ_LIB_OBJS)

fuzz: fuzz-build
	@set -e; for f in $(FUZZERS); do \
		echo "== $$f ($(FUZZ_SECONDS) s)"; \
		mkdir -p $(FUZZ_BUILD)/corpus-$$f; \
		$(FUZZ_BUILD)/$$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
			-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/$$f- \
			$(FUZZ_BUILD)/corpus-$$f tests/fuzz/corpus/$$f 2>$(FUZZ_BUILD)/$$f.log || \
			{ tail -n 60 $(FUZZ_BUILD)/$$f.log; echo "$$f: failed (see $(FUZZ_BUILD)/$$f.log)"; exit 1; }; \
		grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units)" $(FUZZ_BUILD)/$$f.log | tail -n 1; \
	done

# The hooks, the default config file and the units name the paths of this
# prefix (@libexecdir@, @SBINDIR@, @LIBEXECDIR@).  The config file is installed only when
# there is none: make install never overwrites an operator's file (a package
# manager has its own conffile handling).
PUPPET_MODULE_FILES = $(patsubst contrib/puppet/%,%,$(wildcard contrib/puppet/*.md \
	contrib/puppet/*.json contrib/puppet/*/*.pp contrib/puppet/*/*.epp \
	contrib/puppet/lib/facter/*.rb))

install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(sbindir) $(DESTDIR)$(libexecdir)/hooks \
		$(DESTDIR)$(libexecdir)/validation.d \
		$(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man5 $(DESTDIR)$(mandir)/man8 \
		$(DESTDIR)$(unitdir) $(DESTDIR)$(sysusersdir) $(DESTDIR)$(sysconfdir)/orchestrate \
		$(DESTDIR)$(localstatedir)/lib/orchestrate
	install -m 0755 bin/orchestrate $(DESTDIR)$(bindir)/orchestrate
	install -m 0755 bin/orchestrated $(DESTDIR)$(sbindir)/orchestrated
	install -m 0755 bin/orchestrate-hook-runner $(DESTDIR)$(libexecdir)/orchestrate-hook-runner
	install -m 0755 contrib/orchestrate-migrate-paths $(DESTDIR)$(libexecdir)/orchestrate-migrate-paths
	install -m 0644 contrib/sysusers.d/orchestrate.conf $(DESTDIR)$(sysusersdir)/orchestrate.conf
	install -m 0755 hooks/config hooks/services hooks/upgrade.example \
		$(DESTDIR)$(libexecdir)/hooks/
	sed 's|@libexecdir@|$(libexecdir)|g' hooks/validate >$(DESTDIR)$(libexecdir)/hooks/validate
	chmod 0755 $(DESTDIR)$(libexecdir)/hooks/validate
	for m in man/orchestrate.1:man1 man/orchestrate.conf.5:man5 man/orchestrated.8:man8; do \
		sed 's/^\.Os.*/.Os orchestrate $(VERSION)/' $${m%%:*} \
			>$(DESTDIR)$(mandir)/$${m##*:}/$$(basename $${m%%:*}) && \
		chmod 0644 $(DESTDIR)$(mandir)/$${m##*:}/$$(basename $${m%%:*}) || exit 1; \
	done
	sed -e 's|@SBINDIR@|$(sbindir)|g' -e 's|@LIBEXECDIR@|$(libexecdir)|g' \
		contrib/systemd/orchestrated.service.in \
		> $(DESTDIR)$(unitdir)/orchestrated.service
	chmod 0644 $(DESTDIR)$(unitdir)/orchestrated.service
	sed 's|@LIBEXECDIR@|$(libexecdir)|g' contrib/systemd/orchestrate-hook@.service.in \
		> '$(DESTDIR)$(unitdir)/orchestrate-hook@.service'
	chmod 0644 '$(DESTDIR)$(unitdir)/orchestrate-hook@.service'
	install -m 0644 contrib/systemd/orchestrate-hook.socket $(DESTDIR)$(unitdir)/orchestrate-hook.socket
	test -e $(DESTDIR)$(sysconfdir)/orchestrate/orchestrate.yaml || { \
		sed 's|@libexecdir@|$(libexecdir)|g' contrib/orchestrate.yaml \
			>$(DESTDIR)$(sysconfdir)/orchestrate/orchestrate.yaml && \
		chmod 0644 $(DESTDIR)$(sysconfdir)/orchestrate/orchestrate.yaml; }
	for f in $(PUPPET_MODULE_FILES); do \
		install -D -m 0644 contrib/puppet/$$f $(DESTDIR)$(puppetmoduledir)/$$f || exit 1; \
	done
	install -m 0644 LICENSE $(DESTDIR)$(puppetmoduledir)/LICENSE
	install -d $(DESTDIR)$(prometheusdir)
	install -m 0644 $(RULES_DIR)/orchestrate.rules.yml $(RULES_DIR)/orchestrate.rules.test.yml \
		$(DESTDIR)$(prometheusdir)/

clean:
	rm -f $(PROGRAMS) liborchestrate.a orchestrate/*/*.o orchestrate/*/*.d tests/unit/*.d \
		$(UNIT_TESTS) $(ETCD_DRIVERS) $(BUILD_FLAGS)
	rm -rf tests/trash.* $(FUZZ_BUILD) bench/out.spawn_cost

.PHONY: all check check-layers check-rules check-unit bench bench-spawn demo lint-man print-version fuzz fuzz-build install clean FORCE
FORCE:
.DELETE_ON_ERROR:

# bench/fleet-sim: N real nodes (node.c) in one process, for bench/fleet.sh.  It
# links every daemon object but orchestrated.o (the daemon's main), so node
# files added to DAEMON_OBJS come along.  Its hooks run in hook_simulate() mode
# (they end on timers, no process runs); the stamp file rebuilds it when
# FLEET_SIM_CFLAGS changes.
FLEET_SIM_OBJS = $(filter-out orchestrate/node/orchestrated.o,$(DAEMON_OBJS))
FLEET_SIM_CFLAGS ?=
FLEET_SIM_FLAGS = bench/.fleet-sim-flags
$(FLEET_SIM_FLAGS): FORCE
	@echo '$(FLEET_SIM_CFLAGS)' | cmp -s - $@ || echo '$(FLEET_SIM_CFLAGS)' >$@

bench/fleet-sim: bench/fleet-sim.c $(FLEET_SIM_OBJS) liborchestrate.a $(wildcard include/*/*.h) $(FLEET_SIM_FLAGS)
	$(QUIET_LINK)$(CC) $(ALL_CFLAGS) $(FLEET_SIM_CFLAGS) -pthread -o $@ bench/fleet-sim.c \
		$(FLEET_SIM_OBJS) liborchestrate.a $(ALL_LDFLAGS) $(PKG_LIBS)

# The fleet benchmarks (bench/README.md): SIZES="1000 3000 10000" by default.
bench-fleet: all bench/fleet-sim
	bench/fleet.sh

bench-daemons: all
	bench/daemons.sh

clean-bench:
	rm -f bench/fleet-sim $(FLEET_SIM_FLAGS)

.PHONY: bench-fleet bench-daemons clean-bench

# The headers each object read (DEPFLAGS above), last: every variable they
# name is set by now.
-include $(wildcard orchestrate/*/*.d tests/unit/*.d $(FUZZ_BUILD)/*/*.d)
