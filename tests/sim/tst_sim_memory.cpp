// Memory map (bytes by part at a bit-width), unit kinds and layouts, DRAM allocation (uniform,
// weighted, water-filling, not fitting) and the model-shape profiles.
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "sparselens/sim/memory_map.h"
#include "test_support.h"

namespace {

using namespace sl::sim;

const std::string assets = std::string(SPARSELENS_SOURCE_DIR) + "/assets";

// stories260K's shape: dim 64, hidden 172, 5 layers, 8 heads (head 8), 4 KV heads, vocab 512, tied.
model_shape tiny() {
    model_shape s;
    s.name = "tiny";
    s.dim = 64;
    s.hidden_dim = 172;
    s.n_layers = 5;
    s.n_heads = 8;
    s.n_kv_heads = 4;
    s.vocab_size = 512;
    s.tied_embeddings = true;
    return s;
}

TEST(SimMemory, WeightBytesWithGroupScales) {
    const quant_format q4 = quant_default(4);
    EXPECT_EQ(q4.group_size, 32u);
    EXPECT_EQ(weight_bytes(32, 4, q4), 16u + 2u);
    EXPECT_EQ(weight_bytes(33, 4, q4), 17u + 4u);  // 132 bits -> 17 bytes, two groups
    EXPECT_EQ(weight_bytes(5120, 3, quant_default(3)), 1920u + 320u);
    EXPECT_EQ(weight_bytes(5120, 2, quant_default(2)), 1280u + 320u);
    EXPECT_EQ(weight_bytes(5120, 8, quant_default(8)), 5120u + 320u);
    const quant_format q16 = quant_default(16);
    EXPECT_EQ(q16.group_size, 0u);
    EXPECT_EQ(weight_bytes(5120, 16, q16), 10240u);
    quant_format q64 = q4;
    q64.group_size = 64;
    EXPECT_EQ(weight_bytes(5120, 4, q64), 2560u + 160u);  // +0.25 bit per weight
    quant_format bad = q4;
    bad.bits = 0;
    EXPECT_FALSE(quant_validate(bad).ok());
}

TEST(SimMemory, UnitKindSizes) {
    const model_shape s = tiny();
    const quant_format q = quant_default(8);
    const uint64_t row = 64 + 2 * 2, col = 172 + 6 * 2;  // wb(64), wb(172) at 8 bits + scales
    struct row_t {
        unit_kind k;
        uint64_t bytes;
        uint32_t units;
    };
    for (const row_t& r :
         {row_t{unit_kind::neuron_bundle, 3 * row, 172}, row_t{unit_kind::up_down_bundle, 2 * row, 172},
          row_t{unit_kind::gate_row, row, 172}, row_t{unit_kind::up_row, row, 172},
          row_t{unit_kind::down_column, row, 172}, row_t{unit_kind::input_column_pair, 2 * col, 64},
          row_t{unit_kind::up_column, col, 64}, row_t{unit_kind::gate_column, col, 64}}) {
        EXPECT_EQ(unit_kind_bytes(r.k, s, q), r.bytes) << unit_kind_name(r.k);
        EXPECT_EQ(unit_kind_units(r.k, s), r.units) << unit_kind_name(r.k);
        unit_kind back{};
        ASSERT_TRUE(unit_kind_parse(unit_kind_name(r.k), back));
        EXPECT_EQ(back, r.k);
    }
}

TEST(SimMemory, LayoutsCoverEachMatrixOnce) {
    EXPECT_TRUE(layout_validate(mlp_layout{{unit_kind::input_column_pair, unit_kind::down_column}, {}}).ok());
    EXPECT_TRUE(layout_validate(mlp_layout{{unit_kind::gate_row, unit_kind::up_column, unit_kind::down_column}, {}}).ok());
    EXPECT_FALSE(layout_validate(mlp_layout{{unit_kind::neuron_bundle, unit_kind::down_column}, {}}).ok());
    EXPECT_FALSE(layout_validate(mlp_layout{{unit_kind::input_column_pair, unit_kind::up_column}, {}}).ok());
    EXPECT_FALSE(layout_validate(mlp_layout{{}, {}}).ok());
    EXPECT_EQ(layout_parse("dip")->groups,
              (std::vector<unit_kind>{unit_kind::input_column_pair, unit_kind::down_column}));
    EXPECT_EQ(layout_parse("cats")->groups, (std::vector<unit_kind>{unit_kind::up_down_bundle}));
    EXPECT_EQ(layout_parse("gate_row,up_row")->groups,
              (std::vector<unit_kind>{unit_kind::gate_row, unit_kind::up_row}));
    EXPECT_FALSE(layout_parse("bogus").ok());
    EXPECT_FALSE(layout_parse("up_row,up_column").ok());
}

TEST(SimMemory, SplitLayoutsParseAndSizeByHand) {
    const mlp_layout svd = layout_parse("ffsplit:17:svd:6").value();
    EXPECT_EQ(svd.groups, (std::vector<unit_kind>{unit_kind::split_heavy, unit_kind::split_light}));
    EXPECT_EQ(svd.split, (mlp_split{17, 6, false}));
    EXPECT_EQ(layout_name(svd), "ffsplit:17:svd:6");
    const mlp_layout q4 = layout_parse("ffsplit:0:q4").value();
    EXPECT_EQ(q4.groups, (std::vector<unit_kind>{unit_kind::split_light}));
    EXPECT_EQ(layout_name(q4), "ffsplit:0:q4");
    for (const char* bad : {"ffsplit", "ffsplit:17", "ffsplit:17:svd", "ffsplit:x:q4", "ffsplit:17:q4:3", "ffsplit:-1:q4",
                            "ffsplit:17:svd:6:1", "ffsplit:17:zip:6", "split_heavy", "split_light,down_column"})
        EXPECT_FALSE(layout_parse(bad).ok()) << bad;
    // tiny(): dim 64, hidden 172, 5 layers; 8 bits + fp16 scale per 32 (a 64-weight row is 68 bytes).
    const auto mm = memory_map_build(tiny(), quant_default(8), svd, 0).value();
    EXPECT_EQ(mm.mlp_static_bytes, 0u);
    ASSERT_EQ(mm.groups.size(), 2u);
    EXPECT_EQ(mm.groups[0].units_per_layer, 17u);
    EXPECT_EQ(mm.groups[0].unit_bytes, 3u * 68);
    EXPECT_EQ(mm.groups[1].units_per_layer, 1u);
    // 155 light neurons, rank 6: gate and up [155, 6] + [6, 64]; down [64, 6] + [6, 155]. A 6-weight row
    // is 6 + 2 bytes, a 155-weight row 155 + 5 * 2.
    EXPECT_EQ(mm.groups[1].unit_bytes, 2u * (155 * 8 + 6 * 68) + 64 * 8 + 6 * 165);
    EXPECT_EQ(mm.mlp_dynamic_bytes, 5u * (17 * 3 * 68 + mm.groups[1].unit_bytes));
    const auto mq = memory_map_build(tiny(), quant_default(8), layout_parse("ffsplit:17:q4").value(), 0).value();
    EXPECT_EQ(mq.groups[1].unit_bytes, 3u * 155 * 2 * 18);  // Q4_0 whatever the map's bits
    EXPECT_FALSE(memory_map_build(tiny(), quant_default(8), layout_parse("ffsplit:173:q4").value(), 0).ok());
    EXPECT_FALSE(memory_map_build(tiny(), quant_default(8), layout_parse("ffsplit:17:svd:65").value(), 0).ok());
}

TEST(SimMemory, MapOfATinyModelByHand) {
    // 8 bits + fp16 scale per 32: a 64-weight row is 68 bytes, a 172-weight row 184.
    const auto mm = memory_map_build(tiny(), quant_default(8), mlp_layout{{unit_kind::up_down_bundle}, {}}, 10).value();
    EXPECT_EQ(mm.attention_bytes, 5u * (64 + 32 + 32 + 64) * 68);
    EXPECT_EQ(mm.embedding_bytes, 512u * 68);
    EXPECT_EQ(mm.classifier_bytes, 0u);  // tied
    EXPECT_EQ(mm.norm_bytes, 11u * 64 * 2);
    EXPECT_EQ(mm.kv_cache_bytes, 2u * 5 * 32 * 10 * 2);
    EXPECT_EQ(mm.mlp_static_bytes, 5u * 172 * 68);       // the gate stays dense for CATS-style units
    EXPECT_EQ(mm.mlp_dynamic_bytes, 5u * 172 * 2 * 68);  // up row + down column per unit
    EXPECT_EQ(mm.resident_bytes(),
              mm.attention_bytes + mm.embedding_bytes + mm.norm_bytes + mm.kv_cache_bytes + mm.mlp_static_bytes);
    EXPECT_EQ(mm.per_token_static_read_bytes(),
              mm.attention_bytes + mm.embedding_bytes + 68 + mm.norm_bytes + mm.kv_cache_bytes + mm.mlp_static_bytes);

    // A bundle layout stores the same MLP weights as three dense matrices when sizes divide evenly.
    model_shape even = tiny();
    even.hidden_dim = 192;
    const auto dense = memory_map_build(even, quant_default(4), mlp_layout{}, 0).value();
    const uint64_t gate = 192u * weight_bytes(64, 4, quant_default(4)),
                   down = 64u * weight_bytes(192, 4, quant_default(4));
    EXPECT_EQ(dense.mlp_dynamic_bytes, 5 * (2 * gate + down));
    EXPECT_EQ(dense.mlp_static_bytes, 0u);

    model_shape untied = tiny();
    untied.tied_embeddings = false;
    const auto u = memory_map_build(untied, quant_default(8), mlp_layout{}, 0).value();
    EXPECT_EQ(u.classifier_bytes, u.embedding_bytes);
    quant_format q = quant_default(4);
    q.embedding_bits = 8;
    EXPECT_EQ(memory_map_build(untied, q, mlp_layout{}, 0)->embedding_bytes, 512u * 68);
}

TEST(SimMemory, UniformAllocation) {
    const auto mm = memory_map_build(tiny(), quant_default(8), mlp_layout{}, 10).value();
    const uint64_t unit = mm.groups[0].unit_bytes;
    const uint64_t extra = 5 * 40 * unit + 123;  // 40 units per layer and some change
    const allocation a = allocate(mm, mm.resident_bytes() + extra).value();
    EXPECT_TRUE(a.fits);
    EXPECT_EQ(a.cache_bytes, extra);
    for (uint32_t l = 0; l < 5; ++l) {
        EXPECT_EQ(a.layer_cache_bytes[l], extra / 5);
        EXPECT_EQ(a.stream_capacity[l], 40u);
    }
    EXPECT_EQ(a.used_cache_bytes, 5 * 40 * unit);

    const allocation all = allocate(mm, mm.resident_bytes() + mm.mlp_dynamic_bytes * 3).value();
    for (uint32_t c : all.stream_capacity) EXPECT_EQ(c, 172u);  // capped at the layer's units
}

TEST(SimMemory, WeightedAllocationWaterFills) {
    const auto mm = memory_map_build(tiny(), quant_default(8), mlp_layout{}, 0).value();
    const uint64_t layer_need = mm.groups[0].layer_bytes();
    const uint64_t cache = 2 * layer_need;  // room for two whole layers' units
    const std::vector<double> w = {1, 1, 1, 1, 100};
    const allocation a = allocate(mm, mm.resident_bytes() + cache, w).value();
    EXPECT_EQ(a.layer_cache_bytes[4], layer_need);  // capped; the excess goes to the others
    const uint64_t total = std::accumulate(a.layer_cache_bytes.begin(), a.layer_cache_bytes.end(), uint64_t{0});
    EXPECT_LE(total, cache);
    EXPECT_GE(total + 5, cache);  // only rounding is lost
    for (uint32_t l = 0; l < 4; ++l) EXPECT_NEAR(double(a.layer_cache_bytes[l]), double(layer_need) / 4, 2.0);

    const allocation zero = allocate(mm, mm.resident_bytes() + cache, std::vector<double>{0, 1, 0, 0, 0}).value();
    EXPECT_EQ(zero.stream_capacity[0], 0u);
    EXPECT_EQ(zero.stream_capacity[1], 172u);

    EXPECT_FALSE(allocate(mm, mm.resident_bytes(), std::vector<double>{1, 1}).ok());
    EXPECT_FALSE(allocate(mm, mm.resident_bytes(), std::vector<double>{1, 1, -1, 1, 1}).ok());
    EXPECT_FALSE(allocate(mm, mm.resident_bytes(), std::vector<double>{0, 0, 0, 0, 0}).ok());
    EXPECT_FALSE(allocate(mm, mm.resident_bytes(), std::vector<double>{1, 1, std::nan(""), 1, 1}).ok());
}

TEST(SimMemory, GroupsShareALayerByTheirBytes) {
    const auto mm = memory_map_build(tiny(), quant_default(8), layout_parse("dip").value(), 0).value();
    ASSERT_EQ(mm.groups.size(), 2u);
    const uint64_t b0 = mm.groups[0].layer_bytes(), b1 = mm.groups[1].layer_bytes();
    const uint64_t per_layer = (b0 + b1) / 2;
    const allocation a = allocate(mm, mm.resident_bytes() + 5 * per_layer).value();
    ASSERT_EQ(a.stream_capacity.size(), 10u);
    for (uint32_t l = 0; l < 5; ++l) {
        const uint32_t c0 = a.stream_capacity[l * 2], c1 = a.stream_capacity[l * 2 + 1];
        EXPECT_NEAR(double(c0), 0.5 * mm.groups[0].units_per_layer, 1.0);
        EXPECT_NEAR(double(c1), 0.5 * mm.groups[1].units_per_layer, 1.0);
        EXPECT_LE(c0 * mm.groups[0].unit_bytes + c1 * mm.groups[1].unit_bytes, a.layer_cache_bytes[l]);
    }
}

TEST(SimMemory, ResidentPartThatDoesNotFitIsReported) {
    const auto mm = memory_map_build(tiny(), quant_default(8), mlp_layout{}, 10).value();
    const allocation a = allocate(mm, mm.resident_bytes() - 1000).value();
    EXPECT_FALSE(a.fits);
    EXPECT_EQ(a.static_overflow_bytes, 1000u);
    EXPECT_EQ(a.cache_bytes, 0u);
    EXPECT_FALSE(a.message.empty());
    EXPECT_EQ(a.message.find('\n'), std::string::npos);
    for (uint32_t c : a.stream_capacity) EXPECT_EQ(c, 0u);
}

TEST(SimMemory, ShapeProfiles) {
    struct want_t {
        const char* name;
        int32_t dim, hidden, layers, heads, kv, vocab;
    };
    for (const want_t& w :
         {want_t{"phi3-medium", 5120, 17920, 40, 40, 10, 32064}, want_t{"phi3-mini", 3072, 8192, 32, 32, 32, 32064},
          want_t{"llama3-8b", 4096, 14336, 32, 32, 8, 128256}, want_t{"mistral-7b", 4096, 14336, 32, 32, 8, 32000}}) {
        auto s = shape_find(w.name, assets);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(s->dim, w.dim);
        EXPECT_EQ(s->hidden_dim, w.hidden);
        EXPECT_EQ(s->n_layers, w.layers);
        EXPECT_EQ(s->n_heads, w.heads);
        EXPECT_EQ(s->n_kv_heads, w.kv);
        EXPECT_EQ(s->vocab_size, w.vocab);
        EXPECT_FALSE(s->tied_embeddings);
    }
    // Phi-3-Medium has about 14 B parameters: 4.5 bits/weight is ~7.85 GB.
    const auto mm =
        memory_map_build(shape_find("phi3-medium", assets).value(), quant_default(4), mlp_layout{}, 0).value();
    EXPECT_NEAR(double(mm.weight_bytes_total()) * 8 / 4.5 / 1e9, 13.96, 0.01);

    sl::model_hparams hp;
    hp.dim = 64;
    hp.hidden_dim = 172;
    hp.n_layers = 5;
    hp.n_heads = 8;
    hp.n_kv_heads = 4;
    hp.vocab_size = 512;
    hp.seq_len = 512;
    const model_shape s = shape_from_hparams(hp, true, "stories260K");
    EXPECT_TRUE(shape_validate(s, "x").ok());
    EXPECT_EQ(s.kv_dim(), 32);
    EXPECT_TRUE(s.tied_embeddings);

    model_shape bad = tiny();
    bad.n_kv_heads = 3;
    EXPECT_FALSE(shape_validate(bad, "x").ok());
    bad = tiny();
    bad.dim = 65;
    EXPECT_FALSE(shape_validate(bad, "x").ok());
    const std::string text = R"({"schema": "sparselens.model_shape", "version": 1, "name": "x", "dim": 64,
        "hidden_dim": 172, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": -1})";
    const std::string path = sl::test::write_temp("shape_bad.json", std::vector<uint8_t>(text.begin(), text.end()));
    auto r = shape_load(path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("'vocab_size'"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(path), std::string::npos) << r.message();
    std::remove(path.c_str());
}

}  // namespace
