//===- onnx-from-text.cpp - ONNX text syntax to a binary model ------------===//
//
//   onnx-from-text INPUT.txt -o OUTPUT.onnx [--extract PREFIX]
//
// With --extract, only the lines that start with PREFIX are read, with the
// prefix removed: a lit test keeps its model in `// ONNX: ...` lines.
//
//===----------------------------------------------------------------------===//
#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char **argv) {
  std::string input, output, prefix;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc)
      output = argv[++i];
    else if (arg == "--extract" && i + 1 < argc)
      prefix = argv[++i];
    else
      input = arg;
  }
  if (input.empty() || output.empty()) {
    std::cerr << "usage: onnx-from-text INPUT -o OUTPUT.onnx [--extract PREFIX]\n";
    return 1;
  }
  std::ifstream in(input);
  if (!in) {
    std::cerr << "onnx-from-text: cannot open '" << input << "'\n";
    return 1;
  }
  std::string text, line;
  while (std::getline(in, line)) {
    if (prefix.empty()) {
      text += line + "\n";
      continue;
    }
    size_t start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line.compare(start, prefix.size(), prefix) == 0)
      text += line.substr(start + prefix.size()) + "\n";
  }
  onnx::ModelProto model;
  onnx::Common::Status status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) {
    std::cerr << "onnx-from-text: " << input << ": " << status.ErrorMessage() << "\n";
    return 1;
  }
  std::ofstream out(output, std::ios::binary);
  if (!model.SerializeToOstream(&out)) {
    std::cerr << "onnx-from-text: cannot write '" << output << "'\n";
    return 1;
  }
  return 0;
}
