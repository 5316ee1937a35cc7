"""Exporting schedlab's loop IR and traces to Apache TVM, and importing TVM's traces.

- `to_tvm_script(func)`: the function as TVMScript (`tvm.script.from_source` parses it);
- `trace_to_tvm_json(trace)` / `trace_to_tvm_python(trace)`: a trace as TVM's trace JSON
  (`tvm.s_tir.Trace.apply_json_to_schedule`) or as a `def apply(sch):` TVM Schedule script;
- `trace_from_tvm_json(data)`: a TVM trace as a schedlab Trace;
- `read_tvm_database(work_dir)`: MetaSchedule JSON database records, their traces imported.

None of this imports TVM: the formats are written and read as text. docs/tvm.md shows the round
trip, and which TVM version the formats follow (0.27, the `tirx` / `s_tir` namespaces).
"""

from .errors import TVMExportError, TVMImportError
from .tvm_database import TVMRecord, read_tvm_database, read_tvm_record
from .tvm_python import trace_to_tvm_python
from .tvm_script import to_tvm_script
from .tvm_trace import supported_tvm_kinds, trace_from_tvm_json, trace_to_tvm_json

__all__ = [
    "TVMExportError",
    "TVMImportError",
    "TVMRecord",
    "read_tvm_database",
    "read_tvm_record",
    "supported_tvm_kinds",
    "to_tvm_script",
    "trace_from_tvm_json",
    "trace_to_tvm_json",
    "trace_to_tvm_python",
]
