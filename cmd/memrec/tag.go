package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newTagCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tag RUN KEY=VALUE...",
		Short: "Set tags of a run (KEY= removes a tag)",
		Example: `  memrec tag bs64 batch_size=64 amp=on
  memrec tag bs64 amp=`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tags, err := parseTags(args[1:])
			if err != nil {
				return err
			}
			db, err := g.openExisting()
			if err != nil {
				return err
			}
			defer db.Close()
			r, err := db.SetTags(args[0], tags)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.io.Out, "%s: %s\n", r.Name, formatTags(r.Tags))
			return nil
		},
	}
}

// parseTags parses KEY=VALUE arguments.
func parseTags(args []string) (map[string]string, error) {
	tags := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("tag %q: want KEY=VALUE", a)
		}
		tags[k] = v
	}
	return tags, nil
}
