// Chat template families recognised by marker and their single-turn prompt formats (llama.cpp's built-in formats).
#include "sparselens/core/chat_format.h"

namespace sl {

namespace {

std::string trim(const std::string& s) {
    const char* ws = " \t\n\r\f\v";
    const size_t a = s.find_first_not_of(ws);
    if (a == std::string::npos) return {};
    return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

}  // namespace

const char* chat_family_name(chat_family f) {
    switch (f) {
    case chat_family::llama3: return "llama3";
    case chat_family::chatml: return "chatml";
    case chat_family::phi3: return "phi3";
    case chat_family::gemma: return "gemma";
    case chat_family::llama2: return "llama2";
    case chat_family::llama2_sys: return "llama2-sys";
    case chat_family::llama2_sys_bos: return "llama2-sys-bos";
    case chat_family::llama2_sys_strip: return "llama2-sys-strip";
    case chat_family::mistral_v1: return "mistral-v1";
    case chat_family::mistral_v3: return "mistral-v3";
    case chat_family::mistral_v3_tekken: return "mistral-v3-tekken";
    case chat_family::mistral_v7: return "mistral-v7";
    }
    return "?";
}

const char* chat_end_of_turn(chat_family f) {
    switch (f) {
    case chat_family::llama3: return "<|eot_id|>";
    case chat_family::chatml: return "<|im_end|>";
    case chat_family::phi3: return "<|end|>";
    case chat_family::gemma: return "<end_of_turn>";
    default: return nullptr;
    }
}

result<chat_family> chat_family_of(const std::string& t, const std::string& source) {
    const auto has = [&](const char* marker) { return t.find(marker) != std::string::npos; };
    const auto other = [&](const char* family) {
        return error{source + ": chat template of the " + std::string(family) +
                     " family is not supported (supported: Llama-3, ChatML, Phi-3, Gemma, Mistral/Llama-2 [INST])"};
    };
    if (t.empty()) return error{source + ": the model has no chat template (tokenizer.chat_template)"};
    if (has("<|im_start|>")) {
        if (has("<|im_sep|>")) return other("Phi-4");
        if (has("<end_of_utterance>")) return other("SmolVLM");
        return chat_family::chatml;
    }
    if (t.rfind("mistral", 0) == 0 || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]")) return chat_family::mistral_v7;
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]")) return chat_family::mistral_v1;
            if (has("\"[INST]\"")) return chat_family::mistral_v3_tekken;
            return chat_family::mistral_v3;
        }
        if (has("content.strip()")) return chat_family::llama2_sys_strip;
        if (has("bos_token + '[INST]")) return chat_family::llama2_sys_bos;
        if (has("<<SYS>>")) return chat_family::llama2_sys;
        return chat_family::llama2;
    }
    if (has("<|assistant|>") && has("<|end|>")) return chat_family::phi3;
    // Families llama.cpp checks before Gemma and Llama-3 whose markers could otherwise be mistaken.
    if (has("[gMASK]<sop>")) return other("ChatGLM-4");
    if (has("<|assistant|>") && has("<|user|>")) return other("GLM-Edge/Falcon-3");
    if (has("<|user|>") && has("<|endoftext|>")) return other("Zephyr");
    if (has("bos_token + message['role']")) return other("Monarch");
    if (has("<start_of_turn>")) return chat_family::gemma;
    if (has("'\\n\\nAssistant: ' + eos_token")) return other("Orion");
    if (has("GPT4 Correct ")) return other("OpenChat");
    if (has("USER: ") && has("ASSISTANT: ")) return other("Vicuna");
    if (has("### Instruction:") && has("<|EOT|>")) return other("DeepSeek-Coder");
    if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return other("Command-R");
    if (has("<|start_header_id|>") && has("<|end_header_id|>")) return chat_family::llama3;
    return error{source + ": chat template not recognised (supported: Llama-3, ChatML, Phi-3, Gemma, Mistral/Llama-2 "
                          "[INST]); the prompt was not wrapped"};
}

std::string chat_format(chat_family f, const std::string& user, const std::string& system) {
    const bool sys = !system.empty();
    std::string s;
    switch (f) {
    case chat_family::llama3:
        if (sys) s += "<|start_header_id|>system<|end_header_id|>\n\n" + trim(system) + "<|eot_id|>";
        s += "<|start_header_id|>user<|end_header_id|>\n\n" + trim(user) + "<|eot_id|>";
        return s + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case chat_family::chatml:
        if (sys) s += "<|im_start|>system\n" + system + "<|im_end|>\n";
        return s + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    case chat_family::phi3:
        if (sys) s += "<|system|>\n" + system + "<|end|>\n";
        return s + "<|user|>\n" + user + "<|end|>\n<|assistant|>\n";
    case chat_family::gemma:  // no system turn: the system text opens the user's turn
        s = "<start_of_turn>user\n";
        if (sys && !trim(system).empty()) s += trim(system) + "\n\n";
        return s + trim(user) + "<end_of_turn>\n<start_of_turn>model\n";
    case chat_family::llama2:
    case chat_family::llama2_sys:
    case chat_family::llama2_sys_bos:
    case chat_family::llama2_sys_strip: {
        const bool strip = f == chat_family::llama2_sys_strip;
        s = "[INST] ";
        if (sys) {
            const std::string c = strip ? trim(system) : system;
            s += f == chat_family::llama2 ? c + "\n" : "<<SYS>>\n" + c + "\n<</SYS>>\n\n";
        }
        return s + (strip ? trim(user) : user) + " [/INST]";
    }
    case chat_family::mistral_v1:
        return " [INST] " + (sys ? system + "\n\n" : "") + user + " [/INST]";
    case chat_family::mistral_v3:
        return "[INST] " + (sys ? system + "\n\n" : "") + user + "[/INST]";
    case chat_family::mistral_v3_tekken:
        return "[INST]" + (sys ? system + "\n\n" : "") + user + "[/INST]";
    case chat_family::mistral_v7:
        if (sys) s += "[SYSTEM_PROMPT] " + system + "[/SYSTEM_PROMPT]";
        return s + "[INST] " + user + "[/INST]";
    }
    return user;
}

result<std::string> chat_apply(const std::string& chat_template, const std::string& source, const std::string& user,
                               const std::string& system) {
    auto f = chat_family_of(chat_template, source);
    if (!f) return f.err();
    return chat_format(f.value(), user, system);
}

}  // namespace sl
