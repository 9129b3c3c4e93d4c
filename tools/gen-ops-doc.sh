#!/bin/bash
# Writes the ONNX op list of docs/ops.md from the importer's own tables:
# `fsdpc --list-ops` (the patterns, with what each does not cover) and
# `fsdpc --list-unsupported-ops`. test/CLI/ops-doc.test fails when
# docs/ops.md is not what this prints.
#
#   tools/gen-ops-doc.sh > docs/ops.md        (fsdpc on PATH, or FSDPC=path)
set -euo pipefail
fsdpc=${FSDPC:-fsdpc}
supported=$("$fsdpc" --list-ops | sort -s -k1,1)
unsupported=$("$fsdpc" --list-unsupported-ops)
cat <<'HEADER'
# ONNX ops

What the importer reads, generated from its pattern table by
`tools/gen-ops-doc.sh` (`fsdpc --list-ops`, `fsdpc --list-unsupported-ops`);
`test/CLI/ops-doc.test` fails when this page is stale. An op is listed
once per pattern; a pattern applies from its opset until the next one of
the same op. Tensors are f32 or i64 (int32 and bool widen to i64; bf16 and
f16 initializers and inputs widen to f32).

HEADER
echo "## Supported ($(echo "$supported" | awk '{print $1}' | sort -u | wc -l) ops)"
echo
echo "| op | from opset | does not cover |"
echo "| --- | --- | --- |"
echo "$supported" | awk '{ op = $1; since = $2; limits = ""; i = index($0, " -- ");
                          if (i > 0) limits = substr($0, i + 4);
                          printf "| %s | %s | %s |\n", op, since, limits }'
echo
echo "## Not supported yet ($(echo "$unsupported" | wc -l) ops)"
echo
echo "The default-domain ops libonnx 1.12 has schemas for (through opset 17),"
echo "and the newer ones fsdpc registers, that have no pattern. A model using"
echo "one is refused with an error naming every such op and its nodes."
echo
echo "$unsupported" | awk 'BEGIN { line = "" } { item = "`" $1 "`"; if (length(line) + length(item) > 74) { print line ","; line = item } else { line = line (line == "" ? "" : ", ") item } } END { print line }'
echo
echo "One use of \`NonZero\` compiles: the boolean row selection"
echo "\`x[mask].view(B, -1, ...)[:, j]\` of classification heads (BART's), which"
echo "the importer rewrites with static shapes before anything else"
echo "(docs/importer.md, \"Boolean row selection\")."
