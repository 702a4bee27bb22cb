# tests/memindex: test_memindex, the in-memory near-duplicate index against
# a brute-force scan, k = 0..7, on uniform, clustered, duplicate-heavy and
# adversarial sets, while it grows past its resize thresholds.
simstore_unit_test(test_memindex memindex/test_memindex.c)
target_link_libraries(test_memindex PRIVATE simstore_memindex)
# test_bandindex: the in-memory index of sketches by their LSH bands against
# a brute-force comparison of every band, for several band shapes.
simstore_unit_test(test_bandindex memindex/test_bandindex.c)
target_link_libraries(test_bandindex PRIVATE simstore_memindex)
