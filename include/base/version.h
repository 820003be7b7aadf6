/*
 * version.h — the release, one place for both programs: the Makefile's
 * VERSION, passed as -DORCHESTRATE_VERSION="...".  The man pages carry the
 * same string (tests/t0010-help.sh checks that they agree).
 */
#ifndef ORCHESTRATE_VERSION_H
#define ORCHESTRATE_VERSION_H

#ifndef ORCHESTRATE_VERSION
#error "ORCHESTRATE_VERSION comes from the Makefile: make VERSION=..."
#endif

#endif
