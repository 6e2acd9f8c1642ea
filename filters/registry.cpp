// Filter instances, the registry, and plugin loading with dlopen.
#include <dlfcn.h>

#include "filters/filter.h"

namespace canopy::filters {

class Library {
 public:
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~Library() { dlclose(handle_); }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* handle() const { return handle_; }
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

Filter::Filter(const canopy_filter_descriptor* descriptor, void* state, std::shared_ptr<Library> library)
    : descriptor_(descriptor), state_(state), library_(std::move(library)) {}

Filter::~Filter() { descriptor_->destroy(state_); }

Result<void> Filter::execute(std::span<const Packet> wave, std::vector<Packet>& out) {
  const std::size_t before = out.size();
  if (!descriptor_->execute(state_, wave.data(), wave.size(), &out, &error_)) return Error{std::move(error_)};
  // Contributors the filter did not set: the whole wave's (state packets count 0).
  std::uint32_t total = 0;
  for (const auto& p : wave) total += p.contributors();
  for (std::size_t i = before; i < out.size(); ++i) {
    if (!out[i].contributors_set()) out[i].set_contributors(total);
  }
  return {};
}

Result<void> Filter::set_params(const Packet& params) {
  if (!descriptor_->set_params) {
    if (params.size() == 0) return {};
    return Error{std::string("filter '") + name() + "' takes no parameters"};
  }
  if (descriptor_->set_params(state_, &params, &error_)) return {};
  return Error{std::string(name()) + ": " + std::move(error_)};
}

Result<Packet> Filter::extract_state() {
  if (!descriptor_->extract_state) {
    return Error{std::string("filter '") + name() + "' is not state recoverable"};
  }
  Packet state;
  if (descriptor_->extract_state(state_, &state, &error_)) return state;
  return Error{std::string(name()) + ": " + std::move(error_)};
}

Result<void> Filter::set_context(const FilterContext& context) {
  if (descriptor_->abi_version < 2 || !descriptor_->set_context) return {};
  if (descriptor_->set_context(state_, &context, &error_)) return {};
  return Error{std::string(name()) + ": " + std::move(error_)};
}

Result<void> check_descriptor(const canopy_filter_descriptor* d, const std::string& name) {
  if (d == nullptr) return Error{"canopy_filter_" + name + " returned no descriptor"};
  if (d->abi_version < CANOPY_FILTER_ABI_OLDEST || d->abi_version > CANOPY_FILTER_ABI_VERSION) {
    return Error{"filter '" + name + "' was built for filter ABI version " + std::to_string(d->abi_version) +
                 ", this node takes versions " + std::to_string(CANOPY_FILTER_ABI_OLDEST) + " to " +
                 std::to_string(CANOPY_FILTER_ABI_VERSION) + "; rebuild the plugin"};
  }
  if (d->layout != filter_layout()) {
    return Error{"filter '" + name +
                 "' was built with a different C++ standard library or Canopy packet layout "
                 "(layout " + std::to_string(d->layout) + ", expected " +
                 std::to_string(filter_layout()) + "); rebuild the plugin"};
  }
  if (d->name == nullptr || name != d->name) {
    return Error{"canopy_filter_" + name + " describes a filter named '" +
                 std::string(d->name ? d->name : "(null)") + "'"};
  }
  if (!d->create || !d->destroy || !d->execute) {
    return Error{"filter '" + name + "' lacks create, destroy or execute"};
  }
  return {};
}

void FilterRegistry::add(const canopy_filter_descriptor* descriptor, std::shared_ptr<Library> library) {
  std::string path = library ? library->path() : "";
  entries_[descriptor->name] = Entry{descriptor, std::move(library), std::move(path)};
}

Result<void> FilterRegistry::load(const std::string& path, const std::string& name) {
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789_") != std::string::npos) {
    return Error{"filter name '" + name + "' is not an identifier"};
  }
  if (auto it = entries_.find(name); it != entries_.end()) {
    if (it->second.path == path) return {};
    return Error{"a filter named '" + name + "' is already loaded" +
                 (it->second.path.empty() ? std::string(" (built in)") : " from " + it->second.path)};
  }
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    // dlerror() names the file itself.
    return Error{std::string("cannot load filter plugin: ") + (why ? why : path + ": unknown error")};
  }
  auto library = std::make_shared<Library>(handle, path);
  const std::string symbol = kFilterSymbolPrefix + name;
  dlerror();
  void* entry = dlsym(handle, symbol.c_str());
  if (!entry) {
    return Error{path + " has no symbol " + symbol + " (export it with CANOPY_FILTER(" + name +
                 ", YourClass))"};
  }
  const canopy_filter_descriptor* descriptor = reinterpret_cast<canopy_filter_entry>(entry)();
  if (auto ok = check_descriptor(descriptor, name); !ok) return Error{path + ": " + ok.error()};
  add(descriptor, std::move(library));
  return {};
}

Result<std::unique_ptr<Filter>> FilterRegistry::create(const std::string& name,
                                                       const FilterContext& context,
                                                       const Packet& params) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string known;
    for (const auto& [n, e] : entries_) known += (known.empty() ? "" : ", ") + n;
    return Error{"unknown filter '" + name + "' (known: " + known + ")"};
  }
  const auto* d = it->second.descriptor;
  std::string error;
  void* state = d->create(&context, &params, &error);
  if (!state) return Error{"filter '" + name + "': " + (error.empty() ? "create failed" : error)};
  return std::make_unique<Filter>(d, state, it->second.library);
}

std::string FilterRegistry::plugin_path(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? "" : it->second.path;
}

bool FilterRegistry::state_recoverable(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.descriptor->extract_state != nullptr;
}

std::vector<std::string> FilterRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [n, e] : entries_) names.push_back(n);
  return names;
}

}  // namespace canopy::filters
