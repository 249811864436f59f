package compare

import (
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
)

func TestOtherDifferencesNamesWhatElseChanged(t *testing.T) {
	run := func(name, job string, tags map[string]string) *analysis.Report {
		return &analysis.Report{Run: name, Job: job, Tags: tags}
	}
	cases := []struct {
		name string
		runs []*analysis.Report
		want []string // substrings, one note each; none when empty
	}{
		{"only the tag and the numbers of the command", []*analysis.Report{
			run("a", "python train.py --bs 32", map[string]string{"batch_size": "32", "model": "resnet18"}),
			run("b", "python train.py --bs 64", map[string]string{"batch_size": "64", "model": "resnet18"}),
		}, nil},
		{"another model", []*analysis.Report{
			run("a", "python train.py --bs 32", map[string]string{"batch_size": "32", "model": "resnet18"}),
			run("b", "python train.py --bs 64", map[string]string{"batch_size": "64", "model": "bert"}),
		}, []string{`model as well as batch_size (model=resnet18 in "a", model=bert in "b")`}},
		{"a tag one run lacks", []*analysis.Report{
			run("a", "", map[string]string{"batch_size": "32", "amp": "1"}),
			run("b", "", map[string]string{"batch_size": "64"}),
		}, []string{`amp=- in "b"`}},
		{"another script", []*analysis.Report{
			run("a", "python train.py --bs 32", map[string]string{"batch_size": "32"}),
			run("b", "python finetune.py --bs 64", map[string]string{"batch_size": "64"}),
		}, []string{`different commands ("a", "b"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := otherDifferences(&Comparison{Reports: tc.runs}, "batch_size")
			if len(got) != len(tc.want) {
				t.Fatalf("notes %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("note %q lacks %q", got[i], w)
				}
			}
		})
	}
}
