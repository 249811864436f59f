package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/storage"
)

// completionShells are the shells `memrec completion` writes a script for.
var completionShells = []string{"bash", "zsh", "fish", "powershell"}

// newCompletionCmd replaces cobra's default completion command, which
// prints its help and exits 0 for a shell it does not know: here an
// unsupported shell is an error (exit 2), as a wrong argument is.
func newCompletionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Write the shell completion script (run names, tag keys, flag values)",
		Long: `Write the completion script of a shell to stdout. Run names complete from
the database the command would use (--db, or MEMREC_DB); compare --by completes
the runs' tag keys; --format, --source, --align and the other flags with a fixed
set of values complete those.

  bash:  source <(memrec completion bash)       (needs the bash-completion package)
         memrec completion bash > /etc/bash_completion.d/memrec
  zsh:   memrec completion zsh > "${fpath[1]}/_memrec"
  fish:  memrec completion fish > ~/.config/fish/completions/memrec.fish`,
		ValidArgs:             completionShells,
		Args:                  cobra.ExactArgs(1),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), g.io.Out
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			fmt.Fprintf(g.io.Err, "memrec: completion %q: want one of %s (no script is written for other shells)\n", args[0], strings.Join(completionShells, ", "))
			return exitError{code: 2}
		},
	}
}

// flagValues are the flags whose values are a fixed set, by command.
var flagValues = map[string]map[string][]string{
	"export":  {"format": exportFormatNames()},
	"import":  {"format": {"jsonl", "nvidia-smi"}},
	"record":  {"source": {"nvml", "sim"}, "sim-scenario": {"none", "leak", "fragmentation", "oom"}, "sim-clock": {"real", "fake"}},
	"fit":     {"source": {"nvml", "sim"}},
	"compare": {"align": {"step", "epoch", "time"}},
}

// runArgs are the commands whose positional arguments are runs: all of
// them, or only the first.
var runArgs = map[string]bool{"analyze": false, "report": false, "export": false, "sites": false, "tag": false,
	"rm": true, "compare": true, "view": true}

// addCompletion adds the completion command and the dynamic completions to
// the command tree: run names, compare --by tag keys, flag values.
func addCompletion(root *cobra.Command, g *globals) {
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCompletionCmd(g))
	for _, cmd := range root.Commands() {
		name := cmd.Name()
		for flag, values := range flagValues[name] {
			vals := values
			cmd.RegisterFlagCompletionFunc(flag, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return vals, cobra.ShellCompDirectiveNoFileComp
			})
		}
		if all, ok := runArgs[name]; ok {
			cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 && !all {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeRuns(g, args, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if name == "compare" || name == "fit" {
			cmd.RegisterFlagCompletionFunc("by", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return completeTagKeys(g), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

// completionRuns lists the runs of the database the command would use,
// waiting at most a moment for its lock: a completion must never hang on
// a database a recorder is writing.
func completionRuns(g *globals) []storage.Run {
	db, err := storage.Open(g.dbPath, storage.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		return nil
	}
	defer db.Close()
	runs, _ := db.Runs()
	return runs
}

// completeRuns is the run names that start with toComplete, less those
// already on the line.
func completeRuns(g *globals, args []string, toComplete string) []string {
	var out []string
	for _, r := range completionRuns(g) {
		if strings.HasPrefix(r.Name, toComplete) && !slices.Contains(args, r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

// completeTagKeys is every tag key of the database's runs, sorted.
func completeTagKeys(g *globals) []string {
	seen := map[string]bool{}
	for _, r := range completionRuns(g) {
		for k := range r.Tags {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
