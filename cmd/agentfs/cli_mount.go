package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/mount"
)

// mountCommand is agentfs mount: the subject's files as a directory.
func mountCommand() *command {
	return clientCommand(command{
		name:    "mount",
		summary: "mount your files (or one prefix) as a directory with FUSE",
		usage:   "agentfs mount DIR [--prefix P] [--run R] [--agent A] [--read-only] [--cache-dir D] [--write-back [--write-back-workers N]] [--metadata-ttl T]",
		help: `Serves your files under PREFIX (all of them without it) at DIR with FUSE,
in the foreground until fusermount3 -u DIR, umount, Ctrl-C (SIGINT) or
SIGTERM, each of which unmounts cleanly (every closed file is already
stored). Shell tools, git and editors work in it: directories are
prefixes (an empty one is kept by a directory marker), each close or
fsync of a written file is one version (a keyed replace, conditional on
the version it opened), a rename over a file makes a new version of it,
rm is a restorable delete, chmod and touch are kept, symlinks work.
Changes made elsewhere appear through the event feed. Hard links and
extended attributes answer ENOTSUP.

--write-back (with --cache-dir D, a directory that outlives the mount)
makes a close (and a mkdir) return once the file and its store's record
are written to D/pending/ (not fsynced: a crash of the mount process loses
nothing closed; fsync waits for the store), and sends the stores in the
background, N at a time
(--write-back-workers, default 16), each with the same key and condition
a close would send: tar -x no longer waits for one store at a time. A
SIGKILLed mount loses nothing closed: the next --write-back mount on D
sends what is pending first. Open, fsync, chmod, rename and rm of a file
wait for its pending stores; an unmount stores them all first. A store
refused for good is reported on stderr and kept in D/failed/; another
mount sees a file only once it is stored.

A chmod or touch made elsewhere makes no event: the mount shows it once
the mode and mtime it holds are older than --metadata-ttl (default 5m).

Every write carries --run (and --agent), so 'agentfs run show R' lists the
session and 'agentfs run revert R' undoes it. Needs /dev/fuse and
fusermount3 (Debian: apt-get install fuse3). See docs/mount.md.

Examples:
  agentfs mount /mnt/agentfs --prefix work/ --run session-1
  agentfs mount ./view --read-only
`}, false, mountFlags)
}

func mountFlags(fs *flag.FlagSet) verbFunc {
	var opts mount.Options
	var run, agent string
	fs.StringVar(&opts.Prefix, "prefix", "", "mount only the files under `P` (a folder of your files)")
	fs.StringVar(&run, "run", "", "attribute every write to the run `R` (X-Run-ID)")
	fs.StringVar(&agent, "agent", "", "attribute every write to the agent `A` (X-Agent-ID)")
	fs.BoolVar(&opts.ReadOnly, "read-only", false, "refuse every write (EROFS)")
	fs.StringVar(&opts.CacheDir, "cache-dir", "", "stage writes and cache reads in `D` (default: a temporary directory)")
	fs.BoolVar(&opts.WriteBack, "write-back", false, "return from close once the file is recorded in --cache-dir, and store it in the background")
	fs.IntVar(&opts.WriteBackWorkers, "write-back-workers", mount.DefaultWriteBackWorkers, "with --write-back, send `N` stores at once")
	fs.DurationVar(&opts.MetadataTTL, "metadata-ttl", mount.DefaultMetadataTTL, "answer a file's mode and mtime from what the mount holds for `T` at most (a chmod or touch made elsewhere shows after that)")
	fs.BoolVar(&opts.Debug, "debug", false, "log every FUSE call to stderr")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("mount needs exactly one DIR")
		}
		if opts.WriteBack && opts.CacheDir == "" {
			return usagef("--write-back needs --cache-dir D, a directory that outlives the mount: it holds the closed files not stored yet")
		}
		if opts.WriteBackWorkers < 1 {
			return usagef("--write-back-workers must be at least 1")
		}
		if opts.MetadataTTL <= 0 {
			return usagef("--metadata-ttl must be a positive duration, such as 30s or 5m")
		}
		getenv := func(k string) string {
			switch {
			case k == "AGENTFS_RUN_ID" && run != "":
				return run
			case k == "AGENTFS_AGENT_ID" && agent != "":
				return agent
			}
			return cli.getenv(k)
		}
		c, err := newCLIClient(getenv, false)
		if err != nil {
			return err
		}
		m, err := mount.New(c, args[0], opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(cli.stderr, "agentfs mount: serving %s at %s; fusermount3 -u %s (or Ctrl-C) unmounts\n",
			cmp.Or(opts.Prefix, "all files"), args[0], args[0])
		done := make(chan struct{})
		go func() { m.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
		}
		return unmountBusy(m, done)
	}
}

// unmountBusy unmounts after a signal, waiting while open files keep the
// mount busy (their close stores them) for up to a minute.
func unmountBusy(m *mount.Mount, done chan struct{}) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := m.Unmount()
		if err == nil {
			<-done
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mount: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
