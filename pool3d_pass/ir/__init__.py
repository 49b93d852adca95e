"""Small, read-only queries on jaxlib MLIR objects, shared by the matchers, the rewrite and pool3d-opt.

By job: `context` (the MLIR context every entry parses into, after checking
that jaxlib has the MLIR Python API this package relies on), `ops` (an op's
name, a value's producer, static shapes, single-block regions), `attributes`
(reading windows, paddings, constants and comparisons, cached per pass run),
`constraints` (seeing through the open `sdy.sharding_constraint` ops a
partially manual shard_map adds), `locations` (an op's `file:line:col` for
remarks). Nothing here changes IR.
"""
