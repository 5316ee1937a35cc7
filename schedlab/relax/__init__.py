"""The graph IR (Relax style): operators with shape inference and legalization to tensor
expressions. The IR nodes, passes, pipelines and the VM build on the operator registry."""
