// A test plugin that is a valid shared object but exports no filter.
extern "C" __attribute__((visibility("default"))) int canopy_test_not_a_filter(void) { return 42; }
