// Package sites says which lines of code hold a GPU's memory, from the
// site snapshots of a run (memrec record --sites, or an imported PyTorch
// memory snapshot).
//
// A snapshot is one process's live bytes by allocation site at one
// moment, with the blocks whose stack was not kept as "untracked". Find is
// the where pass of analysis: the snapshot with the most live bytes, the
// last, the one at the first OOM, and the sites that grow from snapshot to
// snapshot by the growth rule (growth.SiteGrowth, over the steady
// snapshots after the warm-up), each with its share of the leak's slope.
// ReadSites keeps a run's snapshots in memory so that the chart's bands
// of any window (Sites.Bands) are computed without the file.
//
// Input places a snapshot in the run (its step, its epoch, the warm-up)
// and carries the leak verdict; analysis fills it from the run's marks
// (analysis.SitesInput outside Analyze), and the command's decoding
// budget each row is taken from before it is kept: past it, the snapshot
// and every later one are left out and counted (LeftOut), never read in
// part. Nothing here imports analysis.
// A Sites is safe for concurrent use; the rest is plain data.
package sites
