package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// The command reference in docs/cli is generated from the commands' own
// help, so it cannot drift from them; TestCLIDocsAreCurrent checks it.
//
//go:generate go run . gendocs ../../docs/cli

func newGendocsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "gendocs DIR",
		Short:  "Write the command reference, a Markdown page per command, into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return genDocs(args[0])
		},
	}
}

// genDocs writes a Markdown page per command of memrec into dir (made if
// missing), the same on every machine: no date, and the --db default as
// it is without MEMREC_DB.
func genDocs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := &globals{io: streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}}
	root := newRootCmd(g)
	root.DisableAutoGenTag = true
	if f := root.PersistentFlags().Lookup("db"); f != nil {
		f.DefValue = "memrec.db"
	}
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("gendocs %s: %w", dir, err)
	}
	return nil
}
