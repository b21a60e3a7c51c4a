// Runs the `sparselens` executable (path compiled in as SPARSELENS_CLI) for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "test_support.h"

namespace sl::test {

struct run_result {
    int code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs a shell command line; stdout and stderr captured.
inline run_result run_command(const std::string& cmdline) {
    const std::string err_file = write_temp("cli_stderr.txt", {});
    const std::string cmd = cmdline + " 2>" + err_file;
    run_result r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const auto e = read_bytes(err_file);
    r.err.assign(e.begin(), e.end());
    return r;
}

#ifdef SPARSELENS_CLI
inline run_result run_cli(const std::string& args) { return run_command(std::string(SPARSELENS_CLI) + " " + args); }
#endif

// A shared fixture path, single-quoted for the shell.
inline std::string q(const std::string& rel) { return "'" + shared_path(rel) + "'"; }

}  // namespace sl::test
