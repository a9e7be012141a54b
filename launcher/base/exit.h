/* exit: ddplaunch's exit statuses, the contract of ddplaunch(1)'s EXIT STATUS, in one place. Every module that
 * returns or records an exit status names it from here; it decides none of them (policy.c, agent.c, launch.c do).
 * A worker's own exit code passes through unchanged; the launcher adds only the values below. */
#ifndef DDP_EXIT_H
#define DDP_EXIT_H

enum ddp_exit {
    DDP_EXIT_OK = 0,         /* every worker succeeded; a subcommand did what it was asked */
    DDP_EXIT_LAUNCHER = 1,   /* the launcher failed (the machine's fault, not the input's); doctor: a warning */
    DDP_EXIT_USAGE = 2,      /* bad command line, job spec or input: nothing was started; doctor: a failure */
    DDP_EXIT_TEMPFAIL = 75,  /* EX_TEMPFAIL: refused for now (GPUs leased, nodes did not join): retry later */
    DDP_EXIT_TIMEOUT = 124,  /* the last attempt timed out or hung (as timeout(1)) */
    DDP_EXIT_NOEXEC = 126,   /* a worker's program exists but cannot be executed (as the shell) */
    DDP_EXIT_NOTFOUND = 127, /* a worker's program was not found (as the shell) */
    DDP_EXIT_SIGNAL = 128,   /* + N: a worker died by signal N, or the launcher was stopped by signal N */
};

/* doctor's statuses are the same numbers read as a verdict: 0 all ok, 1 a warning, 2 a failure. */
#define DDP_EXIT_DOCTOR_WARN DDP_EXIT_LAUNCHER
#define DDP_EXIT_DOCTOR_FAIL DDP_EXIT_USAGE

/* 128 + signo: the status of death by (or a stop on) signal signo. */
static inline int ddp_exit_signal(int signo)
{
    return DDP_EXIT_SIGNAL + signo;
}

#endif
