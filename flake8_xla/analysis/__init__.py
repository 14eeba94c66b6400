"""Facts about one file, computed once and shared by every rule through ``ctx.get(Fact)``. A rule unit
holds its check's decision and its wording; the questions below are answered here, one a module
(tests/test_rule_units.py keeps tree walks, parent maps and fact classes out of the rule files). The
layer imports nothing of flake8_xla but versions and rule (tests/test_layers.py).

Syntax and names:
  syntax        nodes by type, scopes, parents and what sits around a node; dotted names, call arguments
  releases      which branches of a test on the torch_xla release are compat code on the target
  semantic      what each name and attribute chain refers to (qualified names), and what is compat code
  reads         what copies a device value to the host
  devices       which calls and literals name the XLA device
  environment   which environment variables the file sets
Control flow and values:
  control       where a statement sits, what surely runs before it, which branches hold it
  assignments   where each dotted name is assigned and with what, and where a module is moved in place
  backends      which backend a test selects
  hooks         framework hooks that run once per batch
  project       the other modules of the project: their function summaries and call sites
  summaries     those summaries, made from one module's tree
  calls         which function of another module a call runs
  values        the kinds of value: device tensor, host tensor, host value, module
  bindings      which assignments of a name reach a use; the file's own functions by name
  arguments     what the calls of a function pass for a parameter
  device_values which expressions hold the XLA device, or a device that is not XLA's
  tensors       what an expression holds (one of those kinds); what a loader or loop draws
  masks         which device tensors are boolean masks
  callgraph     the file's own functions, which of them a call runs, and which defs reach one
Step regions and launches:
  loops         which code runs once per step (training and model loops, compiled functions, hooks)
  xla_scopes    which code surely runs on the XLA device
  computations  which nodes surely compile and run a graph on the device
  launches      which processes the file starts and what runs in them
  ranks         which code runs on every rank, and what a rank check restricts
Domain facts:
  placement     what is on the XLA device, since when
  availability  where the file asks whether torch_xla is there
  wraps         FSDP wraps and the optimizers built around them, its own and helpers'; helpers that
                all-reduce gradients
  fsdp          FSDP, SPMD and checkpoint-save facts
  checkpoints   checkpoint managers, sharded models and training loops around a save
  loaders       what a DataLoader feeds and draws from
  ties          which statement ties parameters
"""
