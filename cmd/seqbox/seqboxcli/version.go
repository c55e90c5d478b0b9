package seqboxcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// modulePath is the seqbox module, whose version `seqbox version` prints.
const modulePath = "github.com/seqbox/seqbox"

type versionCLI struct {
	asJSON bool
}

func versionFlags(c *versionCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox version", flag.ContinueOnError)
	fs.BoolVar(&c.asJSON, "json", false, "print JSON (one document; docs/CLI.md has the schema)")
	return fs
}

func versionUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seqbox version [--json]")
	fmt.Fprintln(w, "\nPrints the seqbox module's version (\"(devel)\" when built from a checkout), the commit when")
	fmt.Fprintln(w, "the build recorded one, and the Go version it was built with.")
	fs := versionFlags(&versionCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runVersion(_ context.Context, s streams, args []string) int {
	var c versionCLI
	fs := versionFlags(&c)
	if code, ok := noArgs(s, fs, "version", versionUsage, args); !ok {
		return code
	}
	info, _ := debug.ReadBuildInfo()
	v := buildVersion(info)
	if c.asJSON {
		if err := writeJSON(s.stdout, v); err != nil {
			fmt.Fprintf(s.stderr, "seqbox version: %v\n", err)
			return ExitFailure
		}
		return ExitOK
	}
	line := "seqbox " + v.Version
	if v.Revision != "" {
		line += " (" + v.Revision
		if v.Modified {
			line += ", modified"
		}
		line += ")"
	}
	fmt.Fprintf(s.stdout, "%s, built with %s\n", line, v.GoVersion)
	return ExitOK
}

// buildVersion reads seqbox's version from the build: the main module's
// when the binary is seqbox's own (go install …/cmd/seqbox@v1.2.3, or a
// checkout: "(devel)"), the dependency's when another program embeds this
// package.
func buildVersion(info *debug.BuildInfo) VersionJSON {
	v := VersionJSON{Version: "(devel)", GoVersion: runtime.Version()}
	if info == nil {
		return v
	}
	if info.GoVersion != "" {
		v.GoVersion = info.GoVersion
	}
	var mod *debug.Module
	if info.Main.Path == modulePath || info.Main.Path == "" {
		mod = &info.Main // seqbox's own binary, or a test binary
	}
	for _, d := range info.Deps {
		if mod == nil && d.Path == modulePath {
			mod = d
			if d.Replace != nil {
				mod = d.Replace
			}
		}
	}
	if mod == nil {
		return v
	}
	if mod.Version != "" {
		v.Version = mod.Version
	}
	if mod == &info.Main {
		for _, st := range info.Settings {
			switch st.Key {
			case "vcs.revision":
				v.Revision = st.Value
			case "vcs.modified":
				v.Modified = st.Value == "true"
			}
		}
	}
	return v
}
