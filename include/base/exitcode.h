/*
 * exitcode.h — the exit statuses of orchestrate(1) "EXIT STATUS" and the README, sysexits(3)
 * values, for both programs.  Which error maps to which status is the
 * command line's decision (cli.c, cli_exit_code()); the library only returns
 * errno-style codes.
 */
#ifndef ORCHESTRATE_EXITCODE_H
#define ORCHESTRATE_EXITCODE_H

#define EXIT_USAGE 64		/* EX_USAGE: bad usage, invalid name, bad config */
#define EXIT_NOINPUT 66		/* EX_NOINPUT: the local version file cannot be read */
#define EXIT_UNAVAILABLE 69	/* EX_UNAVAILABLE: etcd unreachable */
#define EXIT_IOERR 74		/* EX_IOERR: cannot write standard output (or a file) */
#define EXIT_TEMPFAIL 75	/* EX_TEMPFAIL: another writer changed it meanwhile */
#define EXIT_NOPERM 77		/* EX_NOPERM: authentication or permission refused */

#endif
