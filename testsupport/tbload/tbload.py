"""Load a log directory the way `tensorboard --logdir DIR` does, and print
what its scalars dashboard can show.

Usage: tbload.py ROOT LOGDIR [--samples N] [--seed S]

ROOT is a copy of upstream/ (TensorBoard's own files, see NOTICE) with the
*_pb2.py that protoc made from its protos beside them, or "-" for an
installed tensorboard package. The log directory is loaded by TensorBoard's
LocalDataIngester with the flags' defaults, so the EventMultiplexer, the
EventAccumulator, its reservoirs, the record reader and the migration of
simple_value to tensors are TensorBoard's own. --samples N is
`--samples_per_plugin scalars=N`. --seed S seeds every reservoir with S
instead of TensorBoard's fixed 0, to see how much a kept point owes to luck.

Prints one JSON object: {"version", "scalars_keep", "runs": {run: {tag:
[{"step", "wall_time", "value"}, ...]}}}, values as TensorBoard decodes them.
"""
import argparse
import functools
import json
import sys
import types


def stub(name, **attrs):
    """Install a module that has only attrs and fails on any other use."""
    m = types.ModuleType(name)
    m.__dict__.update(attrs)

    def missing(attr):
        raise AttributeError("%s.%s: a stub of tbload.py, which a load of scalars should not reach" % (name, attr))

    m.__getattr__ = missing
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, m)
    return m


def install_stubs():
    """Stand in for what only other plugins, graphs or the server need."""
    p = "tensorboard.plugins."
    # data_compat, dataclass_compat and data_ingester compare plugin names
    # with these; no other code of theirs runs for a scalar.
    for plugin, names in {
        "audio": {"PLUGIN_NAME": "audio"},
        "histogram": {"PLUGIN_NAME": "histograms"},
        "image": {"PLUGIN_NAME": "images"},
        "text": {"PLUGIN_NAME": "text"},
        "pr_curve": {"PLUGIN_NAME": "pr_curves"},
        "mesh": {"PLUGIN_NAME": "mesh"},
        "hparams": {"PLUGIN_NAME": "hparams"},
        "custom_scalar": {"PLUGIN_NAME": "custom_scalars"},
        "graph": {
            "PLUGIN_NAME": "graphs",
            "PLUGIN_NAME_RUN_METADATA": "graph_run_metadata",
            "PLUGIN_NAME_RUN_METADATA_WITH_GRAPH": "graph_run_metadata_graph",
            "PLUGIN_NAME_KERAS_MODEL": "graph_keras_model",
            "PLUGIN_NAME_TAGGED_RUN_METADATA": "graph_tagged_run_metadata",
            "RUN_GRAPH_NAME": "__run_graph__",
        },
    }.items():
        stub(p + plugin, __path__=[])
        stub(p + plugin + ".metadata", **names)
    # Graphs, run metadata and meta graphs, whose protos pull in most of
    # TensorFlow's.
    for pb in ("config_pb2", "graph_pb2", "meta_graph_pb2"):
        stub("tensorboard.compat.proto." + pb)
    # The TF stub's command line, which needs absl.
    stub("tensorboard.compat.tensorflow_stub.app")
    stub("tensorboard.compat.tensorflow_stub.flags")
    # The query side: the scalars plugin reads through it, downsampling to
    # the same number of points the reservoir keeps, so it drops no more.
    stub("tensorboard.backend.event_processing.data_provider",
         MultiplexerDataProvider=lambda multiplexer, logdir: None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("logdir")
    ap.add_argument("--samples", type=int)
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    if a.root != "-":
        sys.path.insert(0, a.root)
        install_stubs()

    from tensorboard import version
    from tensorboard.backend.event_processing import data_ingester, reservoir
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.util import tensor_util

    if a.seed is not None:
        reservoir.Reservoir.__init__ = functools.partialmethod(reservoir.Reservoir.__init__, seed=a.seed)
    samples = {} if a.samples is None else {scalar_metadata.PLUGIN_NAME: a.samples}
    # The defaults of tensorboard's flags (plugins/core/core_plugin.py).
    flags = argparse.Namespace(
        logdir=a.logdir, logdir_spec="", samples_per_plugin=samples,
        purge_orphaned_data=True, max_reload_threads=1, reload_multifile=False,
        reload_multifile_inactive_secs=86400, detect_file_replacement=False,
        reload_interval=0, reload_task="blocking")
    ingester = data_ingester.LocalDataIngester(flags)
    ingester.start()  # reload_interval 0: loads once, then returns
    mux = ingester.deprecated_multiplexer
    keep = dict(data_ingester.DEFAULT_TENSOR_SIZE_GUIDANCE, **samples)
    runs = {}
    for run, tags in mux.PluginRunToTagToContent(scalar_metadata.PLUGIN_NAME).items():
        runs[run] = {
            tag: [{"step": e.step, "wall_time": e.wall_time,
                   "value": float(tensor_util.make_ndarray(e.tensor_proto))}
                  for e in mux.Tensors(run, tag)]
            for tag in tags
        }
    json.dump({"version": version.VERSION, "scalars_keep": keep[scalar_metadata.PLUGIN_NAME], "runs": runs}, sys.stdout)


main()
