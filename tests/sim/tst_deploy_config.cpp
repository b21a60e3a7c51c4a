// Deployment configs without the shared fixtures: canonical round trips, the sidecar's checksum, every
// precise error, hostile JSON, the JSON Schema, and measuring a config on a random-weight model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "sparselens/core/synthetic.h"
#include "sparselens/sim/deploy_config.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace sl;
using namespace sl::sim;

namespace {

// A random-weight model of stories260K's shape and a calibration of it, made once.
struct fixture {
    std::string dir, model_path;
    model m;
    calibration cal;
};

const fixture& fx() {
    static const fixture f = [] {
        fixture r;
        r.dir = (fs::temp_directory_path() / ("sl_deploy_" + std::to_string(::getpid()))).string();
        fs::create_directories(r.dir);
        synthetic_params sp = synthetic_default_params();
        sp.path = r.dir + "/tiny.gguf";
        EXPECT_TRUE(synthetic_write(sp).ok());
        r.model_path = sp.path;
        r.m = model_load(sp.path).value();
        std::mt19937 rng(7);
        std::vector<int32_t> tokens(256);
        for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % 500);
        calibration_params cp = calibration_default_params();
        cp.n_ctx = 64;
        auto c = calibrate(r.m, tokens, cp);
        EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.message());
        r.cal = std::move(c).value();
        return r;
    }();
    return f;
}

// Removes the model and calibration files after the run.
struct remove_fixture_dir : ::testing::Environment {
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(fs::temp_directory_path() / ("sl_deploy_" + std::to_string(::getpid())), ec);
    }
};
[[maybe_unused]] const auto* const cleanup = ::testing::AddGlobalTestEnvironment(new remove_fixture_dir);

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
}

// A config with awkward values everywhere: floats without short decimal forms, infinities, a device.
deploy_config sample() {
    deploy_config c;
    c.created = "2025-01-02T03:04:05Z";
    c.tool = "sparselens 0.1.0";
    c.note = "tuned: \"quotes\", unicode é, newline\n";
    c.model = {"tiny.gguf", 1056540, std::string(64, 'a'), "gguf", 64, 172, 5, 8, 4, 512, 512};
    c.method.name = "cats";
    c.method.density = 1.0f / 3.0f;
    c.method.d_in = 0.3f;
    c.method.gamma = 0.1f;
    c.method.pin_fraction = 0.07f;
    c.per_layer = {{"keep", {0.1f, 1.0f / 7.0f, 0.0f, 1.0f, 3.4028235e38f}},
                   {"threshold", {INFINITY, 1e-30f, 0.2785f, -INFINITY, 12345.678f}}};
    c.calibration_file = "x.calib";
    c.calibration_sha256 = std::string(64, '0');
    c.device = device_find("apple-a18").value();
    c.device.dram_bytes = 480000;
    c.policy = cache_policy::window;
    c.window_tokens = 7;
    c.bits = 3;
    c.group_size = 64;
    c.context_tokens = 512;
    c.layout = "cats";
    c.cache_fraction = 0.3f;
    c.expected = {"text.txt", std::string(64, 'b'), 64, 6, 200000, 186, 3.7130000001, 4.0 / 3.0, 0.1, 0.9,
                  0.66129032258064513, 0.7001, 0.99, 1234.5, 2345.6, 256, 1023.5666, 0.479};
    return c;
}

std::string error_of(const std::string& text) {
    auto r = deploy_config_from_json(text, "tuned.json");
    return r.ok() ? std::string("(accepted)") : r.message();
}

// Edits one field of the canonical JSON of `c`.
template <class F>
std::string edited(const deploy_config& c, F&& edit) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(deploy_config_to_json(c));
    edit(j);
    return j.dump(2);
}

}  // namespace

TEST(DeployConfig, JsonRoundTripIsByteIdenticalAndLossless) {
    const deploy_config c = sample();
    const std::string text = deploy_config_to_json(c);
    auto back = deploy_config_from_json(text, "t.json");
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, c);
    EXPECT_EQ(deploy_config_to_json(*back), text);
    EXPECT_NE(text.find("\"density\": 0.33333334"), std::string::npos) << "floats print in their shortest form";
    EXPECT_NE(text.find("\"inf\""), std::string::npos);

    deploy_config none = sample();  // no device, no calibration
    none.device = {};
    none.method.name = "dip";
    none.method.pin_fraction = 0;
    none.calibration_file.clear();
    none.calibration_sha256.clear();
    const std::string t2 = deploy_config_to_json(none);
    EXPECT_NE(t2.find("\"device\": null"), std::string::npos);
    EXPECT_EQ(deploy_config_from_json(t2, "t").value(), none);
}

// Version 2 gave TEAL its attention density: a version-1 TEAL config reads as it ran then (one budget,
// attn_density 1) whatever the field says; version 2 keeps the value, and other methods keep it in both.
TEST(DeployConfig, Version1TealIgnoresAttentionDensity) {
    deploy_config c = sample();
    c.method.attn_density = 0.3f;
    for (const char* name : {"teal", "teal-uniform", "chess-attn"}) {
        c.method.name = name;
        const bool teal = std::string(name) != "chess-attn";
        auto v2 = deploy_config_from_json(deploy_config_to_json(c), "t.json");
        ASSERT_TRUE(v2.ok()) << v2.message();
        EXPECT_EQ(v2->version, 2);
        EXPECT_EQ(v2->method.attn_density, 0.3f) << name;
        EXPECT_EQ(*v2, c);
        auto v1 = deploy_config_from_json(edited(c, [](auto& j) { j["version"] = 1; }), "t.json");
        ASSERT_TRUE(v1.ok()) << v1.message();
        EXPECT_EQ(v1->version, 1);
        EXPECT_EQ(v1->method.attn_density, teal ? 1.0f : 0.3f) << name;
    }
}

TEST(DeployConfig, WriteReadWriteIsByteIdenticalWithSidecar) {
    const fixture& f = fx();
    deploy_config c = sample();
    c.model = deploy_model_identity(f.model_path, f.m).value();
    const std::string a = f.dir + "/a", b = f.dir + "/b";
    fs::create_directories(a);
    fs::create_directories(b);
    ASSERT_TRUE(deploy_config_write(a + "/tuned.json", c, &f.cal).ok());
    EXPECT_TRUE(fs::exists(a + "/tuned.calib"));
    auto r = deploy_config_read(a + "/tuned.json");
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_TRUE(r->calib.has_value());
    EXPECT_EQ(*r->calib, f.cal);
    EXPECT_EQ(r->config.calibration_file, "tuned.calib");
    deploy_config expect = c;
    expect.calibration_file = "tuned.calib";
    expect.calibration_sha256 = r->config.calibration_sha256;
    EXPECT_EQ(r->config, expect);

    ASSERT_TRUE(deploy_config_write(b + "/tuned.json", r->config, &*r->calib).ok());
    EXPECT_EQ(slurp(a + "/tuned.json"), slurp(b + "/tuned.json"));
    EXPECT_EQ(slurp(a + "/tuned.calib"), slurp(b + "/tuned.calib"));
}

TEST(DeployConfig, SidecarMissingOrCorrupted) {
    const fixture& f = fx();
    deploy_config c = sample();
    const std::string dir = f.dir + "/side";
    fs::create_directories(dir);
    ASSERT_TRUE(deploy_config_write(dir + "/tuned.json", c, &f.cal).ok());
    const std::string calib = slurp(dir + "/tuned.calib");

    std::string flipped = calib;
    flipped[flipped.size() / 2] ^= 0x01;
    spit(dir + "/tuned.calib", flipped);
    auto r = deploy_config_read(dir + "/tuned.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message(), dir + "/tuned.calib: checksum mismatch: the sidecar does not belong to " + dir +
                               "/tuned.json or is corrupted");

    fs::remove(dir + "/tuned.calib");
    r = deploy_config_read(dir + "/tuned.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message(), dir + "/tuned.calib: missing: the calibration sidecar named by " + dir +
                               "/tuned.json was not found (it must sit beside the config)");

    // A method that needs a calibration cannot be written without one.
    EXPECT_FALSE(deploy_config_write(dir + "/nocal.json", c, nullptr).ok());
    EXPECT_FALSE(fs::exists(dir + "/nocal.json"));
}

TEST(DeployConfig, PreciseErrors) {
    const deploy_config c = sample();
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["version"] = 3; })),
              "tuned.json: config version 3 is newer than this build supports (2)");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["version"] = 0; })),
              "tuned.json: config version 0 is invalid (versions start at 1)");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["schema"] = "sparselens.device"; })),
              "tuned.json: not a SparseLens deployment config (field 'schema' is \"sparselens.device\", expected "
              "\"sparselens.deploy-config\")");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["method"]["density"] = 1.5; })),
              "tuned.json: field 'method.density' = 1.5 is outside [0, 1]");
    EXPECT_NE(error_of(edited(c, [](auto& j) { j["method"]["name"] = "magic"; })).find("unknown method 'magic'"),
              std::string::npos);
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["simulation"]["policy"] = "fifo"; })),
              "tuned.json: unknown cache policy 'fifo' (none, lru, lfu, belady, window)");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["device"]["flash_bandwidth"] = 0; })),
              "tuned.json: device: field 'flash_bandwidth' must be a positive number of bytes/s");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["expected"]["top1_agreement"] = -0.1; })),
              "tuned.json: field 'expected.top1_agreement' = -0.1 is outside [0, 1]");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["per_layer"]["keep"].erase(0); })),
              "tuned.json: field 'per_layer.keep' has 4 values, the model 5 layers");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["calibration"]["file"] = "../x.calib"; })),
              "tuned.json: field 'calibration.file' must be a plain file name beside the config (got '../x.calib')");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["calibration"] = nullptr; })),
              "tuned.json: method 'cats' needs a calibration but field 'calibration' is null");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["model"].erase("sha256"); })),
              "tuned.json: missing field 'model.sha256'");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["extra"] = 1; })), "tuned.json: unknown field 'extra'");
    EXPECT_EQ(error_of(edited(c, [](auto& j) { j["model"]["dim"] = "64"; })),
              "tuned.json: field 'model.dim' must be an integer (got \"64\")");
}

TEST(DeployConfig, ModelMismatchShapeFirstThenContents) {
    deploy_config c = sample();
    deploy_model id = c.model;
    EXPECT_TRUE(deploy_config_matches(c, id).ok());
    id.sha256 = std::string(64, 'c');
    auto o = deploy_config_matches(c, id);
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.message(), "model file differs from the one tuned (sha256 aaaaaaaaaaaa… vs cccccccccccc…, tiny.gguf vs "
                           "tiny.gguf); pass --allow-other-weights to use it anyway");
    EXPECT_TRUE(deploy_config_matches(c, id, true).ok());
    id.hidden_dim = 768;
    o = deploy_config_matches(c, id, true);
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.message(), "config is for a model with hidden_dim 172, this model has 768");
}

TEST(DeployConfig, HostileJsonNeverCrashes) {
    const std::string text = deploy_config_to_json(sample());
    for (size_t n = 0; n < text.size(); n += 7) EXPECT_FALSE(deploy_config_from_json(text.substr(0, n), "t").ok());
    std::mt19937 rng(1);
    int accepted = 0;
    for (int i = 0; i < 400; ++i) {
        std::string s = text;
        for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng() % 256);
        accepted += deploy_config_from_json(s, "t").ok();  // must return, either way
    }
    EXPECT_LT(accepted, 400);
    for (const char* junk : {"", "null", "[]", "{}", "\"x\"", "{\"schema\": 1}", "[[[[[[[[[[[[[[[[[[[[", "{\"version\": 1e999}"})
        EXPECT_FALSE(deploy_config_from_json(junk, "t").ok()) << junk;
}

namespace {

// The config file `config export` would write for a measured run of the fixture model (with a device
// and a calibration sidecar), as text.
const std::string& exported_config_text() {
    static const std::string text = [] {
        const fixture& f = fx();
        deploy_config c;
        c.model = deploy_model_identity(f.model_path, f.m).value();
        c.method.name = "cats";
        c.method.density = 0.5f;
        c.device = device_find("apple-a18").value();
        c.device.dram_bytes = 480000;
        c.bits = 4;
        c.context_tokens = 256;
        std::mt19937 rng(5);
        std::vector<int32_t> tokens(160);
        for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % 500);
        deploy_measure_params p = deploy_measure_default_params();
        p.n_ctx = 32;
        p.windows = 2;
        p.sim_tokens = 32;
        auto m = measure_expectations(f.m, c, &f.cal, tokens, p);
        EXPECT_TRUE(m.ok()) << m.message();
        if (m.ok()) {
            c.per_layer = m->per_layer;
            c.expected = m->expected;
        }
        const std::string dir = f.dir + "/exported";
        fs::create_directories(dir);
        EXPECT_TRUE(deploy_config_write(dir + "/tuned.json", c, &f.cal).ok());
        return slurp(dir + "/tuned.json");
    }();
    return text;
}

// Every node of a JSON document as a JSON pointer (the root excluded).
void collect_pointers(const nlohmann::ordered_json& j, const nlohmann::ordered_json::json_pointer& at,
                      std::vector<nlohmann::ordered_json::json_pointer>& out) {
    if (j.is_object())
        for (auto it = j.begin(); it != j.end(); ++it) {
            out.push_back(at / it.key());
            collect_pointers(*it, at / it.key(), out);
        }
    else if (j.is_array())
        for (size_t i = 0; i < j.size(); ++i) {
            out.push_back(at / i);
            collect_pointers(j[i], at / i, out);
        }
}

// A refusal is one line that starts with the origin and stays short; an acceptance exports to JSON that
// reads back to the same config.
void expect_refused_or_round_trips(const std::string& text, const std::string& origin, const std::string& what) {
    auto r = deploy_config_from_json(text, origin);
    if (!r.ok()) {
        const std::string& m = r.message();
        EXPECT_EQ(m.rfind(origin + ": ", 0), 0u) << what << ": " << m.substr(0, 200);
        EXPECT_EQ(m.find_first_of("\n\r"), std::string::npos) << what << ": " << m.substr(0, 200);
        EXPECT_LT(m.size(), 400u) << what << ": " << m.substr(0, 200);
        return;
    }
    const std::string again = deploy_config_to_json(*r);
    auto back = deploy_config_from_json(again, origin);
    ASSERT_TRUE(back.ok()) << what << ": accepted, but its export is refused: " << back.message();
    EXPECT_EQ(*back, *r) << what;
}

}  // namespace

TEST(DeployConfig, EveryFieldDeletedRetypedOrOutOfRange) {
    const std::string text = exported_config_text();
    ASSERT_FALSE(text.empty());
    const std::string origin = "/some dir/tuned.json";
    ASSERT_TRUE(deploy_config_from_json(text, origin).ok());
    using ojson = nlohmann::ordered_json;
    const ojson doc = ojson::parse(text);
    std::vector<ojson::json_pointer> pointers;
    collect_pointers(doc, ojson::json_pointer(), pointers);
    ASSERT_GT(pointers.size(), 60u);

    const std::string long_string(70000, 'y');
    const std::vector<ojson> values = {
        nullptr, true, false, 0, -1, -4096, INT64_MIN, UINT64_MAX, uint64_t{1} << 32, int64_t{1} << 31, 0.5, -0.5,
        1e308, -1e308, 4e-320, "", "x", long_string, "line\nbreak \"quoted\" \u00e9 \t tab", "inf", "-inf", "nan",
        ojson::array(), ojson::object(), ojson::array({1, 2}), ojson{{"a", 1}}};
    // Tokens nlohmann_json would not produce: NaN/Infinity (not JSON), overflowing numbers, odd forms.
    const std::vector<std::string> raw = {"NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999",
                                          "123456789012345678901234567890", "-123456789012345678901234567890",
                                          "-0", "0x10", "01", "+1", ".5", "\"unterminated"};
    const std::string marker = "\"@@raw@@\"";
    int cases = 0;
    for (const auto& p : pointers) {
        const std::string at = p.to_string();
        {  // deleted: a missing key is refused (an array element may go, e.g. a device alias, and a
           // per_layer entry: the method's own check names it when the config is instantiated)
            ojson j = doc;
            const ojson::json_pointer parent = p.parent_pointer();
            const bool in_object = j[parent].is_object();
            if (in_object)
                j[parent].erase(p.back());
            else
                j[parent].erase(static_cast<size_t>(std::stoul(p.back())));
            if (in_object && parent.to_string() != "/per_layer") {
                EXPECT_FALSE(deploy_config_from_json(j.dump(2), origin).ok()) << "deleted " << at;
            }
            expect_refused_or_round_trips(j.dump(2), origin, "deleted " + at);
            ++cases;
        }
        for (size_t v = 0; v < values.size(); ++v) {
            ojson j = doc;
            j[p] = values[v];
            expect_refused_or_round_trips(j.dump(2), origin, at + " = value #" + std::to_string(v));
            ++cases;
        }
        for (const std::string& token : raw) {
            ojson j = doc;
            j[p] = "@@raw@@";
            std::string s = j.dump(2);
            s.replace(s.find(marker), marker.size(), token);
            expect_refused_or_round_trips(s, origin, at + " = " + token);
            ++cases;
        }
        if (doc[p].is_object()) {  // an unknown key inside each object
            ojson j = doc;
            j[p]["surprise\nkey"] = 1;
            EXPECT_FALSE(deploy_config_from_json(j.dump(2), origin).ok()) << at;
            expect_refused_or_round_trips(j.dump(2), origin, at + " + unknown key");
            ++cases;
        }
    }
    EXPECT_GT(cases, 2000);
}

TEST(DeployConfig, ExportedFileTruncatedOrScribbledIsRefusedOnOneLine) {
    const std::string text = exported_config_text();
    ASSERT_FALSE(text.empty());
    const std::string dir = fx().dir + "/cut";
    fs::create_directories(dir);
    const std::string path = dir + "/cut.json";
    // Through the file reader too: every 7th-byte truncation of the real file that cuts into the
    // document. A cut in the trailing whitespace leaves a complete config, which is then refused for
    // its missing sidecar under the sidecar's name; whether a 7th byte lands there depends on the
    // measured numbers' text length, so those cuts are left out rather than left to chance.
    const size_t last_brace = text.find_last_of('}');
    ASSERT_NE(last_brace, std::string::npos);
    std::vector<size_t> cuts;
    for (size_t n = 0; n < last_brace; n += 7) cuts.push_back(n);
    cuts.push_back(last_brace);  // only the closing brace missing
    for (const size_t n : cuts) {
        spit(path, text.substr(0, n));
        auto r = deploy_config_read(path);
        ASSERT_FALSE(r.ok()) << "truncated at " << n;
        EXPECT_EQ(r.message().rfind(path + ": ", 0), 0u) << r.message();
        EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
    }
    // Random bytes over random spans of the text.
    std::mt19937 rng(9);
    for (int i = 0; i < 300; ++i) {
        std::string s = text;
        const size_t at = rng() % s.size(), len = 1 + rng() % 16;
        for (size_t k = at; k < std::min(s.size(), at + len); ++k) s[k] = static_cast<char>(rng() % 256);
        expect_refused_or_round_trips(s, "scribbled.json", "scribble at " + std::to_string(at));
    }
}

namespace {

// The parts of JSON Schema the config's schema uses: type, const, enum, required, properties,
// additionalProperties, items, anyOf, minimum/maximum, $ref to #/$defs. Returns the first violation.
std::string check(const nlohmann::json& s, const nlohmann::json& v, const nlohmann::json& root, const std::string& at) {
    if (s.contains("$ref")) return check(root["$defs"][s["$ref"].get<std::string>().substr(8)], v, root, at);
    if (s.contains("anyOf")) {
        for (const auto& alt : s["anyOf"])
            if (check(alt, v, root, at).empty()) return {};
        return at + ": matches no alternative";
    }
    if (s.contains("type")) {
        auto is = [&](const std::string& t) {
            return (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
                   (t == "integer" && v.is_number_integer()) || (t == "number" && v.is_number()) ||
                   (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
        };
        bool ok = false;
        for (const auto& t : s["type"].is_array() ? s["type"] : nlohmann::json::array({s["type"]})) ok = ok || is(t);
        if (!ok) return at + ": wrong type";
    }
    if (s.contains("const") && v != s["const"]) return at + ": differs from const";
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return at + ": not in enum";
    if (v.is_number() && s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) return at + ": below minimum";
    if (v.is_number() && s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) return at + ": above maximum";
    if (v.is_object()) {
        for (const auto& k : s.value("required", nlohmann::json::array()))
            if (!v.contains(k.get<std::string>())) return at + ": missing " + k.get<std::string>();
        for (auto it = v.begin(); it != v.end(); ++it) {
            const nlohmann::json props = s.value("properties", nlohmann::json::object());
            if (props.contains(it.key())) {
                if (auto e = check(props[it.key()], *it, root, at + "." + it.key()); !e.empty()) return e;
            } else if (s.contains("additionalProperties")) {
                const auto& ap = s["additionalProperties"];
                if (ap.is_boolean() && !ap.get<bool>()) return at + ": unexpected " + it.key();
                if (ap.is_object())
                    if (auto e = check(ap, *it, root, at + "." + it.key()); !e.empty()) return e;
            }
        }
    }
    if (v.is_array() && s.contains("items"))
        for (const auto& e : v)
            if (auto err = check(s["items"], e, root, at + "[]"); !err.empty()) return err;
    return {};
}

}  // namespace

TEST(DeployConfig, ExportedConfigsFollowTheSchema) {
    const nlohmann::json schema = nlohmann::json::parse(slurp(SPARSELENS_SOURCE_DIR "/assets/schemas/deploy-config.schema.json"));
    deploy_config c = sample();
    EXPECT_EQ(check(schema, nlohmann::json::parse(deploy_config_to_json(c)), schema, "$"), "");
    c.device = {};
    c.calibration_file.clear();
    c.method.name = "dense";
    c.method.pin_fraction = 0;
    EXPECT_EQ(check(schema, nlohmann::json::parse(deploy_config_to_json(c)), schema, "$"), "");
    // The walker does reject: a missing field, an unknown one, a wrong type.
    auto bad = nlohmann::json::parse(deploy_config_to_json(c));
    bad["expected"].erase("ppl");
    EXPECT_NE(check(schema, bad, schema, "$"), "");
    bad = nlohmann::json::parse(deploy_config_to_json(c));
    bad["simulation"]["bits"] = "4";
    EXPECT_NE(check(schema, bad, schema, "$"), "");
    // The schema's method list is this build's.
    std::vector<std::string> names;
    for (const auto& n : schema["properties"]["method"]["properties"]["name"]["enum"]) names.push_back(n);
    EXPECT_EQ(names, method_names());
}

TEST(DeployConfig, MeasureThenInstantiateResolvesTheSameValues) {
    const fixture& f = fx();
    deploy_config c;
    c.model = deploy_model_identity(f.model_path, f.m).value();
    c.method.name = "chess";
    c.method.density = 0.6f;
    c.device = device_find("apple-a18").value();
    c.device.dram_bytes = 480000;
    c.bits = 8;
    c.context_tokens = 256;
    std::mt19937 rng(3);
    std::vector<int32_t> tokens(200);
    for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % 500);
    deploy_measure_params p = deploy_measure_default_params();
    p.n_ctx = 32;
    p.windows = 2;
    p.offset = 10;
    p.sim_tokens = 64;
    auto m1 = measure_expectations(f.m, c, &f.cal, tokens, p);
    ASSERT_TRUE(m1.ok()) << m1.message();
    EXPECT_EQ(m1->expected.windows, 2);
    EXPECT_EQ(m1->expected.sim_tokens, 64u);
    EXPECT_GT(m1->expected.sim_tokens_per_s, 0.0);
    EXPECT_GT(m1->expected.kld_mean, 0.0);
    ASSERT_EQ(m1->per_layer.size(), 2u);  // keep, score_threshold
    c.per_layer = m1->per_layer;
    c.expected = m1->expected;

    // Re-measuring reproduces every deterministic number.
    auto m2 = measure_expectations(f.m, c, &f.cal, tokens, p);
    ASSERT_TRUE(m2.ok()) << m2.message();
    EXPECT_EQ(m2->expected.ppl, m1->expected.ppl);
    EXPECT_EQ(m2->expected.kld_mean, m1->expected.kld_mean);
    EXPECT_EQ(m2->expected.sim_tokens_per_s, m1->expected.sim_tokens_per_s);
    EXPECT_EQ(m2->expected.sim_hit_rate, m1->expected.sim_hit_rate);

    auto rt = deploy_instantiate(c, f.m, &f.cal, "tuned.json");
    ASSERT_TRUE(rt.ok()) << rt.message();
    EXPECT_NE(rt->sim, nullptr);
    // A drifted value is named precisely.
    c.per_layer[1].second[3] *= 1.001f;
    rt = deploy_instantiate(c, f.m, &f.cal, "tuned.json");
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.message().rfind("tuned.json: per_layer 'score_threshold' of layer 3 is ", 0), 0u) << rt.message();

    // Cancellation through the progress callback.
    c.per_layer = m1->per_layer;
    p.progress = [](float fr) { return fr < 0.3f; };
    auto cancelled = measure_expectations(f.m, c, &f.cal, tokens, p);
    ASSERT_FALSE(cancelled.ok());
    EXPECT_TRUE(cancelled.cancelled());
}

TEST(DeployConfig, NamesThatAreNotUtf8AreWrittenNotThrown) {
    const fixture& f = fx();
    deploy_config c = sample();
    c.model.file_name = "mod\xe8le.gguf";  // a Latin-1 file name
    c.note = "caf\xe9";
    c.expected.eval_text = "\xff.txt";
    std::string text;
    ASSERT_NO_THROW(text = deploy_config_to_json(c));
    auto back = deploy_config_from_json(text, "t.json");
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(back->model.file_name, "mod\xef\xbf\xbdle.gguf");  // U+FFFD
    EXPECT_EQ(back->note, "caf\xef\xbf\xbd");
    const std::string dir = f.dir + "/latin1";
    fs::create_directories(dir);
    ASSERT_TRUE(deploy_config_write(dir + "/tuned.json", c, &f.cal).ok());
    EXPECT_TRUE(deploy_config_read(dir + "/tuned.json").ok());
}
