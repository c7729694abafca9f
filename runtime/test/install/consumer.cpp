// Prints "<libfusion version> <function> <kernels>" for the manifest given as
// argv[1], through the installed headers and libfusion.so.
#include "fusion/runtime/Model.h"
#include "fusion/runtime/Version.h"

#include <iostream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer MANIFEST.json\n";
    return 2;
  }
  try {
    fusion::runtime::Model model = fusion::runtime::Model::load(argv[1]);
    std::cout << fusion::runtime::version() << " " << model.function().name
              << " " << model.kernels().size() << "\n";
  } catch (const std::exception &e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
