// Chat formatting: a model's tokenizer.chat_template recognised by its distinctive markers as one of the families
// Llama-3, ChatML (Qwen), Phi-3, Gemma and Mistral/Llama-2 [INST], and a prompt wrapped in that family's format.
#pragma once

#include <string>

#include "sparselens/core/result.h"

namespace sl {

enum class chat_family {
    llama3,
    chatml,
    phi3,
    gemma,
    llama2,             // [INST] ... [/INST], no system turn
    llama2_sys,         // with <<SYS>>
    llama2_sys_bos,     // <<SYS>>, BOS inside the history
    llama2_sys_strip,   // <<SYS>>, contents stripped
    mistral_v1,         // " [INST] ... [/INST]"
    mistral_v3,         // "[INST] ...[/INST]"
    mistral_v3_tekken,  // "[INST]...[/INST]"
    mistral_v7,         // [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ...[/INST]
};

const char* chat_family_name(chat_family f);

// The token that ends the assistant's turn in this family (<|eot_id|>, <|im_end|>, <|end|>,
// <end_of_turn>); nullptr for the [INST] families, which end with EOS.
const char* chat_end_of_turn(chat_family f);

// The family of a Jinja chat template, recognised by markers in the order llama.cpp checks them (so a
// template of another family that shares a marker is not mistaken for one of ours). Unrecognised or
// empty templates are an error naming `source` and the supported families.
result<chat_family> chat_family_of(const std::string& chat_template, const std::string& source);

// One user turn (with an optional system message) and the opening of the assistant's turn, as the
// family's template renders it; BOS is not included (the tokenizer adds it).
std::string chat_format(chat_family f, const std::string& user, const std::string& system);

// chat_family_of + chat_format.
result<std::string> chat_apply(const std::string& chat_template, const std::string& source, const std::string& user,
                               const std::string& system);

}  // namespace sl
