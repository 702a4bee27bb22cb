# tests/codec: the pure codec (bit I/O, Huffman, blocks) on byte buffers.
simstore_unit_test(test_codec ${CMAKE_CURRENT_LIST_DIR}/test_codec.c)
target_link_libraries(test_codec PRIVATE simstore_codec)
