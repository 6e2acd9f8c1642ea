// A main() for the fuzz harnesses in builds without libFuzzer (gcc, the sanitizer
// build): runs LLVMFuzzerTestOneInput once over every file of the directories and
// files named on the command line, so that the seed corpus and every crash kept in
// fuzz/regressions/ are tests of the ordinary suite (docs/testing.md, "Fuzzing").
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::size_t runs = 0;
  auto run = [&](const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++runs;
  };
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) run(entry.path());
      }
    } else if (std::filesystem::exists(path)) {
      run(path);
    }
  }
  std::printf("%zu inputs ran\n", runs);
  return runs > 0 ? 0 : 1;  // a corpus that is not there proves nothing
}
