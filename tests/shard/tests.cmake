# tests/shard: sharded stores (format/shards.md; included by
# tests/CMakeLists.txt).
# test_manifest: the manifest against format/golden/manifest-3.bin (decoded
# to the values the spec lists, re-encoded byte for byte, every flipped
# byte and truncation rejected), the assignment's test vectors, and sharded
# stores of 1, 2, 3 and 5 shards answering exactly as one store on random,
# duplicate-heavy and clustered fingerprints; a missing shard, a shard that
# disagrees and a directory without a manifest refused.
simstore_unit_test(test_manifest shard/test_manifest.c)
target_link_libraries(test_manifest PRIVATE simstore_shard)
