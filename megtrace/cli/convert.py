"""`megtrace convert IN.mge OUT.mge`: write a model again with other dump options:
format FBS_V2 <-> FBS, optimize_for_inference, names stripped, the 8.14 compatible
form, a strip-info file. Metadata (user_info, optimize options) is kept; testcases of
an mgbtest0 file are carried over when the output is FBS_V2."""
from __future__ import annotations

from .common import UserError, console, existing_file


def add_arguments(p) -> None:
    p.add_argument("model", help="the .mge file to read (ours or MegEngine's)")
    p.add_argument("output", help="the .mge file to write")
    p.add_argument("--format", choices=("FBS_V2", "FBS"), default="FBS_V2",
                   help="serialization format (default FBS_V2, what MegEngine 1.13 writes)")
    p.add_argument("--optimize-for-inference", action="store_true",
                   help="fold BatchNorm and constants, fuse elemwise chains (as trace.dump)")
    p.add_argument("--fuse-conv-bias-nonlinearity", action="store_true",
                   help="with --optimize-for-inference: write ConvBias with its activation")
    p.add_argument("--no-change-graph", action="store_true",
                   help="write the graph as it is (no compatibility rewrites)")
    p.add_argument("--compat", choices=("8.14",), help="the form MegEngine 8.14 reads "
                                                       "(needs --format FBS)")
    p.add_argument("--strip-info", metavar="FILE", help="write the oprs and dtypes used as "
                                                        "JSON (MegEngine's strip_info_file)")
    p.add_argument("--keep-var-name", type=int, choices=(0, 1, 2), default=1,
                   help="0: no names, 1: input/output names (default), 2: every name")
    p.add_argument("--keep-opr-name", action="store_true", help="keep operator names")


def run(args) -> int:
    import megtrace as mge
    from ..dump import Metadata, VarNode, dump_graph
    src = existing_file(args.model)
    if args.compat and args.format != "FBS":
        raise UserError("--compat 8.14 needs --format FBS")
    if args.compat and args.no_change_graph:
        raise UserError("--compat 8.14 rewrites the graph; drop --no-change-graph")
    if args.fuse_conv_bias_nonlinearity and not args.optimize_for_inference:
        raise UserError("--fuse-conv-bias-nonlinearity goes with --optimize-for-inference")
    model = mge.load_graph(src)
    graph, options = model.graph, model.metadata.optimize_options
    if args.optimize_for_inference:
        from megtrace.relay_bridge.optimize import optimize_for_inference
        graph, added = optimize_for_inference(
            graph, fuse_conv_bias_nonlinearity=args.fuse_conv_bias_nonlinearity)
        options |= added
    old = model.metadata
    meta = Metadata(is_valid=old.is_valid or bool(options),
                    graph_modified=old.graph_modified or args.optimize_for_inference,
                    user_info=old.user_info_bytes or None, optimize_options=options)
    outputs = {n: VarNode(graph, v, n) for v, n in zip(graph.outputs, graph.output_names)}
    data, result = dump_graph(outputs, keep_var_name=args.keep_var_name,
                              keep_opr_name=args.keep_opr_name,
                              no_change_graph=args.no_change_graph,
                              strip_info_file=args.strip_info, metadata=meta,
                              dump_format=args.format, compat_older_version=args.compat,
                              input_names=list(graph.input_names))
    note = ""
    if model.testcases:
        if args.format == "FBS_V2":
            from megtrace.fbs.testcases import write_container
            data = write_container(data, model.testcases, list(graph.input_names))
            note = f", {len(model.testcases)} testcase(s) kept"
        else:
            note = f"; its {len(model.testcases)} testcase(s) dropped (mgbtest0 needs FBS_V2)"
    from .. import atomic_io
    atomic_io.write_bytes(args.output, data)
    console.print(f"wrote {args.output}: {args.format}, {result.nr_opr} oprs, "
                  f"{len(data) / 1024:.1f} KiB{note}")
    return 0
