package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion prints what this binary was built from.
func printVersion(w io.Writer) error {
	info, ok := debug.ReadBuildInfo()
	_, err := fmt.Fprint(w, versionText(info, ok))
	return err
}

// versionText renders build information honestly: the module version Go
// recorded ("(devel)" for a work-tree build), the commit and whether the
// tree had uncommitted changes, or that no commit was recorded.
func versionText(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "agentfs (unknown version: the binary carries no build information)\n"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	commit := "commit unknown (built without version control information)"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = "commit " + rev
		if t := settings["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			commit += ", with uncommitted changes"
		}
	}
	goVersion := info.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return fmt.Sprintf("agentfs %s\n%s\nbuilt with %s for %s/%s\n", version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}

// buildVersion is the module version Go recorded in the binary ("(devel)"
// for a work-tree build), for the service.version of traces.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}
