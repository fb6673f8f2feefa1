"""nccl-tests output: read its text (every layout since 2.0) and `-J` JSON, write it byte-compatibly, import it.

    from linkscope.results.nccltests import import_nccl_tests, parse_nccl_tests_file

- `importer`: a file -> a stored run (format detection, provenance, refusals).
- `text_format`, `json_format`: the two parsers; `columns`: the text table's column layouts per version.
- `table`: nccl-tests' table, written as its printf formats do.
- `model`: the parsed document (sections, devices, problems); `validate`: a row's numbers, sanity-checked.
"""

from linkscope.results.nccltests.importer import (ImportResult, ParsedNcclTests, Problem, import_nccl_tests,
                                                  import_nccl_tests_file, parse_nccl_tests_file,
                                                  parse_nccl_tests_json, parse_nccl_tests_text)

__all__ = ["ImportResult", "ParsedNcclTests", "Problem", "import_nccl_tests", "import_nccl_tests_file",
           "parse_nccl_tests_file", "parse_nccl_tests_json", "parse_nccl_tests_text"]
