// The morpheus command as a user runs it, for everything that needs no
// kernel: analyze and specialize on C, IR and bitcode, flags passed through
// to clang, and errors that name what is wrong.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

struct Output {
  int status;
  std::string text; // stdout and stderr
};

// `environment`: assignments the command runs with ("NAME=VALUE ...").
Output morpheus(const std::string &arguments, const std::string &environment = "") {
  std::string command =
      environment + " " + std::string(MORPHEUS_BIN_DIR) + "/morpheus " + arguments + " 2>&1";
  Output output{-1, ""};
  FILE *pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer;
  while (size_t got = fread(buffer.data(), 1, buffer.size(), pipe))
    output.text.append(buffer.data(), got);
  output.status = WEXITSTATUS(pclose(pipe));
  return output;
}

const std::string Example = std::string(MORPHEUS_SOURCE_DIR) + "/examples/policy_fwd.bpf.c";

std::string tempPath(const std::string &name) {
  return "/tmp/morpheus-cli-test-" + std::to_string(getpid()) + "-" + name;
}

nlohmann::json mapNamed(const nlohmann::json &analysis, const std::string &name) {
  for (const auto &map : analysis["maps"])
    if (map["name"] == name)
      return map;
  return nullptr;
}

TEST(Cli, AnalyzeJsonDescribesMapsAndSites) {
  Output out = morpheus("analyze --json " + Example);
  ASSERT_EQ(out.status, 0) << out.text;
  nlohmann::json analysis = nlohmann::json::parse(out.text);
  EXPECT_EQ(mapNamed(analysis, "config")["access"], "ro");
  EXPECT_EQ(mapNamed(analysis, "policy")["access"], "ro");
  EXPECT_EQ(mapNamed(analysis, "stats")["access"], "rw");
  EXPECT_EQ(mapNamed(analysis, "policy")["type"], "hash");
  EXPECT_EQ(mapNamed(analysis, "policy")["key_size"], 8);
  bool policySite = false;
  for (const auto &site : analysis["sites"])
    if (site["map"] == "policy") {
      policySite = true;
      EXPECT_EQ(site["kind"], "lookup");
      EXPECT_EQ(site["key"]["size"], 8);
      EXPECT_NE(site["key"]["sources"].get<std::string>().find("packet"), std::string::npos);
      EXPECT_FALSE(site["key"].contains("constant"));
    } else if (site["map"] == "config") {
      EXPECT_EQ(site["key"]["constant"], "00 00 00 00");
    }
  EXPECT_TRUE(policySite);
}

// A snapshot file holding `maps` (the "maps" object of the document),
// removed with the value.
struct SnapshotFile {
  std::string path;
  explicit SnapshotFile(const std::string &name, const std::string &maps) : path(tempPath(name)) {
    std::ofstream(path) << "{\"maps\": {" << maps << "}}\n";
  }
  ~SnapshotFile() { std::remove(path.c_str()); }
};

// `morpheus explain` with the default costs: the machine's calibration
// (which `run` and `explain` price with when cached) is out of the test's
// control, so the cache directory is one of the test's own, removed at exit.
Output explain(const std::string &arguments) {
  static const struct CacheDirectory {
    std::string path = tempPath("cache");
    CacheDirectory() { mkdir(path.c_str(), 0700); }
    ~CacheDirectory() { std::system(("rm -rf " + path).c_str()); }
  } cache;
  return morpheus("explain " + arguments, "MORPHEUS_CACHE_DIR=" + cache.path);
}

const std::string FieldCounter =
    std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/field_counter.bpf.c";
// rules[0] = {action 1, port 2, hits 0}; stats[0] = 64 (the limit), no key 1.
const std::string FieldCounterTables =
    R"("rules": [{"key": "00000000", "value": "01000000 02000000 0000000000000000"}],)"
    R"( "stats": [{"key": "00000000", "value": "4000000000000000"}])";

// explain: per site what the cycle did, with the program's field names,
// and why not where nothing was done; globals the program never writes are
// folded under a check of their live bytes (a control plane may write them
// through mmap), the ones it writes are left alone.
TEST(Cli, ExplainSaysWhatTheCycleSpecializedAndWhy) {
  SnapshotFile tables("field_counter.json", FieldCounterTables);
  Output out = explain(FieldCounter + " --snapshot " + tables.path);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("field `hits` (bytes 8..15) of key [00 00 00 00], by atomic update at "
                          "field_counter.bpf.c:44"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("field_counter.bpf.c:41, key [00 00 00 00]: specialized by "
                          "fold-read-only-fields: 2 loads of read-only bytes folded"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("field_counter.bpf.c:45, key [00 00 00 00]: specialized by "
                          "constant-key-lookup: constant key: value inlined"),
            std::string::npos)
      << out.text;
  // Key 1 is not in stats: answered null without the lookup.
  EXPECT_NE(out.text.find("field_counter.bpf.c:38, key [01 00 00 00]: specialized by "
                          "key-set-filter: the table does not hold the constant key"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("guards:\n  field_counter_prog: "), std::string::npos) << out.text;

  // A counter written whole at any key: written, not "in part", and no
  // read-only bytes to fold at a constant key.
  SnapshotFile none("none.json", "");
  out = explain(std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/legacy_maps.bpf.c" +
                " --snapshot " + none.path);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("kept: table is written by the data plane: every byte of its values "
                          "is written"),
            std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("in part"), std::string::npos) << out.text;

  std::string source = tempPath("globals.bpf.c");
  std::ofstream(source) << "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
                           "int seen; int mode; const volatile int limit = 3;\n"
                           "SEC(\"xdp\") int prog(struct xdp_md *ctx) {\n"
                           "  seen++; return mode + limit; }\n"
                           "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
  out = explain(source + " --snapshot " + none.path);
  std::remove(source.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("seen (.bss): written by the program (store in prog at "),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("mode (.bss): 1 load of bytes the program never writes will be "
                          "folded; polled, not guarded"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("limit (.rodata): constant"), std::string::npos) << out.text;
}

// explain never reports what the cycle does not do: a key made
// of literals that differ by path is no constant and says why; a compare
// chain is predicted with what the verifier budget may change; a devmap's
// lookup stays, and says why.
TEST(Cli, ExplainSaysWhyAKeyOfLiteralsIsNoConstantAndWhatTheBudgetMayChange) {
  std::string source = tempPath("literals.bpf.c");
  std::ofstream(source) << "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
                           "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4);\n"
                           "  __type(key, __u32); __type(value, __u32); } modes SEC(\".maps\");\n"
                           "SEC(\"xdp\") int prog(struct xdp_md *ctx) {\n"
                           "  __u32 key = 1, *mode;\n"
                           "  if (ctx->rx_queue_index) { key = 2; bpf_map_lookup_elem(&modes, &key); }\n"
                           "  mode = bpf_map_lookup_elem(&modes, &key);\n"
                           "  return mode ? *mode : XDP_PASS; }\n"
                           "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
  SnapshotFile none("none.json", "");
  Output out = explain(source + " --snapshot " + none.path);
  Output json = explain(source + " --json --snapshot " + none.path);
  std::remove(source.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("key from constant (its bytes are not proven constant: key byte 0 is "
                          "written with different values on different paths)"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("inlined as compares over its 4 slots (inline-small-table); unless the "
                          "verifier budget calls for chains that yield an index"),
            std::string::npos)
      << out.text;
  ASSERT_EQ(json.status, 0) << json.text;
  EXPECT_NE(json.text.find("\"constant_unproven\""), std::string::npos) << json.text;

  out = explain(std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/devmap_ports.bpf.c" +
                " --snapshot " + none.path);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("(key-set-filter: the kernel removes a devmap_hash entry when its "
                          "device is unregistered, unguarded, but no key is added without the "
                          "guard)"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the lookup stays because the kernel removes a devmap entry when its "
                          "device is unregistered"),
            std::string::npos)
      << out.text;
}

// A site the plan gives a pass but the cost model declines for the tables
// at hand is reported declined, with the cost model's reason: flows holds
// 40 keys, whose compares cost more than half the lookup they would spare;
// with 2 keys the filter is built. And a write LLVM merged from two lines
// (line 0 in its debug location) is reported at the if holding both.
TEST(Cli, ExplainReportsWhatTheCostModelDeclinesAndWritesAtTheirLines) {
  std::string program = std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/flow_state.bpf.c";
  auto flows = [](unsigned keys) {
    std::string entries;
    for (unsigned key = 0; key < keys; ++key) {
      char hex[9];
      std::snprintf(hex, sizeof hex, "%08x", 0x0a000001 + key);
      entries += std::string(entries.empty() ? "" : ", ") + "{\"key\": \"" + hex +
                 "\", \"value\": \"00000000000000000000000000000000\"}";
    }
    return "\"flows\": [" + entries + "]";
  };
  SnapshotFile many("flows40.json", flows(40)), few("flows2.json", flows(2));
  Output out = explain(program + " --json --snapshot " + many.path);
  ASSERT_EQ(out.status, 0) << out.text;
  nlohmann::json explanation = nlohmann::json::parse(out.text);
  nlohmann::json site = mapNamed(explanation, "flows")["sites"][0];
  EXPECT_EQ(site["planned"], "filtered") << site.dump(2);
  EXPECT_EQ(site["action"], "declined") << site.dump(2);
  EXPECT_EQ(site["pass"], "key-set-filter") << site.dump(2);
  EXPECT_EQ(site["outcome"], "not_cheaper") << site.dump(2);
  EXPECT_NE(site["detail"].get<std::string>().find("the compares over 40 keys"), std::string::npos)
      << site.dump(2);

  out = explain(program + " --json --snapshot " + few.path);
  ASSERT_EQ(out.status, 0) << out.text;
  site = mapNamed(nlohmann::json::parse(out.text), "flows")["sites"][0];
  EXPECT_EQ(site["action"], "specialized") << site.dump(2);
  EXPECT_EQ(site["pass"], "key-set-filter") << site.dump(2);

  out = explain(program + " --snapshot " + few.path);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("written: field `state` (bytes 0..7) of every key, by store at "
                          "flow_state.bpf.c:36 "),
            std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find(".c:0"), std::string::npos) << out.text;
}

// explain --json: the explanation's content, typed: what the cycle did at
// each site (action, pass, outcome, every decision) beside what the plan
// from the program alone said, and the text the operator reads, the same
// as explain prints it.
TEST(Cli, ExplainJsonIsTheExplanationTyped) {
  SnapshotFile tables("field_counter.json", FieldCounterTables);
  Output json = explain(FieldCounter + " --json --snapshot " + tables.path);
  ASSERT_EQ(json.status, 0) << json.text;
  Output text = explain(FieldCounter + " --snapshot " + tables.path);
  ASSERT_EQ(text.status, 0) << text.text;
  nlohmann::json explanation = nlohmann::json::parse(json.text);
  EXPECT_EQ(explanation["inline_limit"], 64);
  EXPECT_EQ(explanation["source"], "the snapshot " + tables.path);
  EXPECT_EQ(explanation["cost_model"].get<std::string>().rfind("cost model: default costs", 0), 0u)
      << explanation["cost_model"];
  nlohmann::json rules = mapNamed(explanation, "rules");
  ASSERT_TRUE(rules.is_object()) << json.text;
  EXPECT_EQ(rules["access"], "written_in_part");
  ASSERT_EQ(rules["writes"].size(), 1u) << rules.dump(2);
  EXPECT_EQ(rules["writes"][0]["bytes"], "field `hits` (bytes 8..15)");
  EXPECT_EQ(rules["writes"][0]["key"], "00 00 00 00");
  ASSERT_EQ(rules["sites"].size(), 1u);
  EXPECT_EQ(rules["sites"][0]["action"], "specialized");
  EXPECT_EQ(rules["sites"][0]["planned"], "folded");
  EXPECT_EQ(rules["sites"][0]["pass"], "fold-read-only-fields");
  EXPECT_EQ(rules["sites"][0]["outcome"], "applied");
  EXPECT_EQ(rules["sites"][0]["constant_key"], "00 00 00 00");
  ASSERT_FALSE(rules["sites"][0]["decisions"].empty());
  nlohmann::json stats = mapNamed(explanation, "stats");
  EXPECT_EQ(stats["inlined_entries"], 1) << stats.dump(2);
  std::set<std::string> actions;
  for (const auto &site : stats["sites"])
    actions.insert(site["action"].get<std::string>());
  EXPECT_EQ(actions, (std::set<std::string>{"specialized"})) << stats.dump(2);
  ASSERT_EQ(explanation["guards"].size(), 1u) << json.text;
  EXPECT_EQ(explanation["guards"][0]["function"], "field_counter_prog");
  // Every site's text is what explain prints for it.
  for (const auto &map : explanation["maps"])
    for (const auto &site : map["sites"])
      EXPECT_NE(text.text.find(": " + site["detail"].get<std::string>() + "\n"),
                std::string::npos)
          << site.dump();

  SnapshotFile none("none.json", "");
  Output inner = explain(std::string(MORPHEUS_SOURCE_DIR) +
                         "/tests/programs/inner_config.bpf.c --json --snapshot " + none.path);
  ASSERT_EQ(inner.status, 0) << inner.text;
  explanation = nlohmann::json::parse(inner.text);
  ASSERT_EQ(explanation["sites_without_one_map"].size(), 2u) << inner.text;
  // tenants holds only its loader's maps (none of the program's fits).
  EXPECT_EQ(explanation["sites_without_one_map"][0]["action"], "kept");
  // configs would name the table; the snapshot holds nothing of it.
  EXPECT_EQ(explanation["sites_without_one_map"][1]["planned"], "resolved");
  EXPECT_EQ(explanation["sites_without_one_map"][1]["action"], "declined") << inner.text;
  EXPECT_EQ(explanation["sites_without_one_map"][1]["outer_maps"],
            nlohmann::json::array({"configs"}));
  EXPECT_EQ(explanation["sites_without_one_map"][1]["inner_candidates"],
            nlohmann::json::array({"primary", "secondary"}));
  EXPECT_EQ(explanation["sites_without_one_map"][0]["inner_candidates"],
            nlohmann::json::array());

  // analyze's old flag says where it went.
  Output old = morpheus("analyze --explain " + FieldCounter);
  EXPECT_EQ(old.status, 2) << old.text;
  EXPECT_NE(old.text.find("'morpheus explain PROG --snapshot STATE.json'"), std::string::npos)
      << old.text;

  // The tables are needed: a usage error, naming both ways to give them.
  Output bare = morpheus("explain " + FieldCounter);
  EXPECT_EQ(bare.status, 2) << bare.text;
  EXPECT_NE(bare.text.find("--snapshot STATE.json or --pin-dir DIR"), std::string::npos)
      << bare.text;
}

// explain on a key whose padding the program never writes: the lookup is
// kept with the bytes named, and so is every other site under the same
// program (its frames decide the stale bytes).
TEST(Cli, ExplainSaysWhichKeyBytesAreStaleAndWhatTheyKeep) {
  SnapshotFile none("none.json", "");
  Output out = explain(std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/padded_key.bpf.c" +
                       " --snapshot " + none.path);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("kept: key bytes 1..3 are never written: the kernel compares the "
                          "stack's stale bytes, which no rewrite can reproduce"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("kept: runs under 'padded_prog', which reaches a lookup whose key may "
                          "hold the stack's stale bytes"),
            std::string::npos)
      << out.text;
}

// analyze and explain --keep-generic MAP: what run --keep-generic does to
// the map, said where the operator looks. Kept generic, a map the program only reads (the
// policy, inlined otherwise) and one it writes in part (field_counter's
// rules, folded otherwise) lose every specialization, and the reason is the
// policy's; a name that is no map is refused naming the program's maps.
TEST(Cli, AnalyzeSaysWhyAMapIsKeptGeneric) {
  SnapshotFile none("none.json", "");
  Output json = explain(Example + " --json --keep-generic policy --snapshot " + none.path);
  ASSERT_EQ(json.status, 0) << json.text;
  nlohmann::json policy = mapNamed(nlohmann::json::parse(json.text), "policy");
  EXPECT_EQ(policy["access"], "kept_generic") << policy.dump(2);
  ASSERT_FALSE(policy["sites"].empty());
  // Planned kept, and every pass the cycle ran there declined for the policy.
  for (const auto &site : policy["sites"]) {
    EXPECT_EQ(site["planned"], "kept") << site.dump();
    EXPECT_NE(site["action"], "specialized") << site.dump();
    EXPECT_NE(site["detail"].get<std::string>().find(
                  "kept generic: written by another loader (policy)"),
              std::string::npos)
        << site.dump();
  }
  EXPECT_EQ(mapNamed(nlohmann::json::parse(json.text), "config")["access"], "read_only");
  Output analysis = morpheus("analyze --json --keep-generic policy " + Example);
  ASSERT_EQ(analysis.status, 0) << analysis.text;
  nlohmann::json analyzed = mapNamed(nlohmann::json::parse(analysis.text), "policy");
  EXPECT_EQ(analyzed["kept_generic"], true);
  EXPECT_EQ(analyzed["access"], "rw");

  std::string counter = std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/field_counter.bpf.c";
  Output text = explain(counter + " --keep-generic rules --snapshot " + none.path);
  ASSERT_EQ(text.status, 0) << text.text;
  EXPECT_NE(text.text.find("kept generic: written by another loader (policy): never "
                           "specialized\n    written: "),
            std::string::npos)
      << "the program's own writes are listed beside the policy\n"
      << text.text;
  EXPECT_EQ(text.text.find("fold-read-only-fields"), std::string::npos) << text.text;

  Output unknown = morpheus("analyze --keep-generic polcy " + Example);
  EXPECT_EQ(unknown.status, 1) << unknown.text;
  EXPECT_NE(unknown.text.find("no map 'polcy' to keep generic (its maps: config, policy, stats"),
            std::string::npos)
      << unknown.text;
}

// Programs as their projects build them: flags from a compile database
// (relative include paths against the entry's directory, the build's own
// -c/-o/-O/-target dropped), and host-compiled IR retargeted, said once.
TEST(Cli, CompileDatabaseGivesTheProjectsFlags) {
  std::string project = tempPath("project");
  ASSERT_EQ(std::system(("mkdir -p " + project + "/src " + project + "/include").c_str()), 0);
  std::ofstream(project + "/include/limits.bpf.h") << "#define RULES MAX_RULES\n";
  std::string source = project + "/src/prog.bpf.c";
  std::ofstream(source) << "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
                           "#include \"limits.bpf.h\"\n"
                           "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, RULES);"
                           " __type(key, __u32); __type(value, __u32); } rules SEC(\".maps\");\n"
                           "SEC(\"xdp\") int prog(struct xdp_md *ctx) { __u32 k = 0;"
                           " __u32 *v = bpf_map_lookup_elem(&rules, &k); return v ? *v : 2; }\n"
                           "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
  std::string database = project + "/compile_commands.json";
  std::ofstream(database)
      << "[{\"directory\": \"" << project << "/build\", \"file\": \"../src/prog.bpf.c\","
      << " \"command\": \"clang -target bpf -O2 -g -c -I ../include -DMAX_RULES=12"
      << " -o prog.o ../src/prog.bpf.c\"}]\n";
  Output out = morpheus("analyze --json --compile-db " + database + " " + source);
  EXPECT_EQ(out.status, 0) << out.text;
  if (out.status == 0)
    EXPECT_EQ(mapNamed(nlohmann::json::parse(out.text), "rules")["max_entries"], 12);
  // Without the database the header is not found: clang's error.
  out = morpheus("analyze " + source);
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("limits.bpf.h"), std::string::npos) << out.text;
  // A database without the file: named, with what to pass.
  out = morpheus("analyze --compile-db " + database + " " + Example);
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find(database + ": no entry for " + Example), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("-I/-D/--cflags"), std::string::npos) << out.text;

  std::string hostIr = project + "/host.ll";
  ASSERT_EQ(std::system((std::string(MORPHEUS_CLANG) + " -O2 -g -S -emit-llvm -I/usr/include/x86_64-linux-gnu " +
                         Example + " -o " + hostIr + " 2>/dev/null")
                            .c_str()),
            0);
  out = morpheus("analyze --json " + hostIr);
  EXPECT_EQ(out.status, 0) << out.text;
  std::string note = hostIr + ": LLVM IR for 'x86_64-pc-linux-gnu' (built for the host), "
                              "retargeted to BPF as `llc -march=bpf` does";
  size_t said = out.text.find(note);
  EXPECT_NE(said, std::string::npos) << out.text;
  if (said != std::string::npos)
    EXPECT_EQ(out.text.find(note, said + note.size()), std::string::npos)
        << "said once: " << out.text;
  std::system(("rm -rf " + project).c_str());
}

// A source including glibc's headers fails for the BPF target on
// gnu/stubs-32.h: clang's error is followed by what to pass, which works.
TEST(Cli, GlibcsStubs32IsExplainedWithWhatToPass) {
  std::string source =
      std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/build_glibc_header.bpf.c";
  Output out = morpheus("analyze " + source);
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("'gnu/stubs-32.h' file not found"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find(source + " includes glibc's headers (gnu/stubs-32.h is asked for by "
                                   "gnu/stubs.h, which takes the BPF target for 32-bit x86): "
                                   "pass -D__x86_64__"),
            std::string::npos)
      << out.text;
  out = morpheus("analyze --json -D __x86_64__ " + source);
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(out.text.find("stubs-32"), std::string::npos) << out.text;
}

TEST(Cli, CompilerFlagsReachClang) {
  Output out = morpheus("analyze --json -DPOLICY_MAX_ENTRIES=4096 " + Example);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(mapNamed(nlohmann::json::parse(out.text), "policy")["max_entries"], 4096);
  Output broken = morpheus("analyze --cflags \"-DPOLICY_MAX_ENTRIES=(\" " + Example);
  EXPECT_EQ(broken.status, 1);
  EXPECT_NE(broken.text.find("clang failed"), std::string::npos) << broken.text;
}

// A repeatable option takes one value per occurrence: the program after it
// stays the positional PROG (CLI11's vectors would take it as a value).
TEST(Cli, RepeatableOptionsLeaveTheProgramToThePositional) {
  Output out = morpheus("analyze --json -I /tmp -D POLICY_MAX_ENTRIES=4096 -I /usr/include " +
                        Example);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(mapNamed(nlohmann::json::parse(out.text), "policy")["max_entries"], 4096);
  std::string snapshot = tempPath("state.json"), object = tempPath("out.o");
  std::ofstream(snapshot) << R"({"maps": {}})";
  out = morpheus("specialize -I /tmp " + Example + " --snapshot " + snapshot + " -o " + object);
  EXPECT_EQ(out.status, 0) << out.text;
  for (const std::string &path : {snapshot, object})
    unlink(path.c_str());
}

TEST(Cli, AcceptsIrAndBitcode) {
  for (const char *kind : {"ll", "bc"}) {
    std::string ir = tempPath(std::string("policy.") + kind);
    std::string compile = std::string(MORPHEUS_CLANG) +
                          " -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu " +
                          (kind == std::string("ll") ? "-S " : "-c ") + "-emit-llvm " +
                          Example + " -o " + ir;
    ASSERT_EQ(std::system(compile.c_str()), 0);
    Output out = morpheus("analyze --json " + ir);
    EXPECT_EQ(out.status, 0) << out.text;
    EXPECT_EQ(mapNamed(nlohmann::json::parse(out.text), "policy")["access"], "ro") << kind;
    unlink(ir.c_str());
  }
}

TEST(Cli, SpecializeWritesObjectAndReport) {
  std::string snapshot = tempPath("state.json"), object = tempPath("out.o"),
              report = tempPath("report.json");
  std::ofstream(snapshot) << R"({"maps": {
      "config": [{"key": "00000000", "value": "02000000 00000000"}],
      "policy": [{"key": "0a000001 0050 11 00", "value": "01000000 000000000000 000000000000"}]}})";
  Output out = morpheus("specialize " + Example + " --snapshot " + snapshot + " -o " + object +
                        " --report " + report);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(access(object.c_str(), R_OK), 0);
  std::ifstream in(report);
  nlohmann::json decisions = nlohmann::json::parse(in);
  EXPECT_EQ(decisions["inlined"]["policy"].size(), 1u);
  bool policyInlined = false;
  for (const auto &site : decisions["sites"])
    policyInlined |= site["map"] == "policy" && site["applied"] == true &&
                     site["pass"] == "inline-small-table";
  EXPECT_TRUE(policyInlined) << decisions.dump(2);
  for (const std::string &path : {snapshot, object, report})
    unlink(path.c_str());
}

// What a snapshot carries decides as a cycle decides (the kernel test
// ProgramKinds.ADumpOfARunningProgramIsDecidedOfflineAsTheCycleDecided
// compares with the live cycle): every slot of a 256-slot array listed,
// two of them non-zero, is inlined as the cycle's read by content gives
// it; the .data section's bytes are what fold-read-only-globals folds; the
// programs' facts choose the entry's in-program fallback, under which the
// callback is guarded and its threshold lookup inlined. Without the facts
// the entry falls back by tail call and the callback stays generic.
TEST(Cli, SpecializeTakesTheGlobalsAndProgramFactsASnapshotCarries) {
  const std::string program = std::string(MORPHEUS_SOURCE_DIR) +
                              "/tests/programs/snapshot_parity.bpf.c";
  std::string snapshot = tempPath("parity.json"), object = tempPath("parity.o"),
              report = tempPath("parity-report.json");
  auto write = [&](const std::string &programs) {
    auto little = [](uint32_t word) { // 4 bytes, least significant first
      char text[9];
      std::snprintf(text, sizeof(text), "%02x%02x%02x%02x", word & 0xff, (word >> 8) & 0xff,
                    (word >> 16) & 0xff, word >> 24);
      return std::string(text);
    };
    nlohmann::json slots = nlohmann::json::array();
    for (uint32_t index = 0; index < 256; ++index)
      slots.push_back({{"key", little(index)},
                       {"value", little(index == 7 ? 3 : index == 9 ? 1 : 0)}});
    nlohmann::json document = {
        {"maps",
         {{"class_by_id", slots},
          {"stale_below", {{{"key", "00000000"}, {"value", "40000000"}}}},
          {"snapshot.data", {{{"key", "00000000"}, {"value", "05000000"}}}}}}};
    if (!programs.empty())
      document["programs"] = nlohmann::json::parse(programs);
    std::ofstream(snapshot) << document.dump();
  };
  auto decisions = [&]() {
    Output out = morpheus("specialize " + program + " --snapshot " + snapshot + " -o " +
                          object + " --guard-version 1 --report " + report);
    EXPECT_EQ(out.status, 0) << out.text;
    std::ifstream in(report);
    return nlohmann::json::parse(in, nullptr, false);
  };
  auto applied = [](const nlohmann::json &decided, const std::string &map) {
    for (const auto &site : decided["sites"])
      if (site["map"] == map && site["applied"] == true)
        return site["pass"].get<std::string>();
    return std::string("none");
  };
  auto guardOf = [](const nlohmann::json &decided, const std::string &function) {
    for (const auto &guard : decided["guards"])
      if (guard["function"] == function)
        return guard["fallback"].get<std::string>();
    return std::string("no guard decision");
  };

  write(R"({"snapshot_parity": {"verified_instructions": 200, "fallback_slot": 0}})");
  nlohmann::json withFacts = decisions();
  EXPECT_EQ(applied(withFacts, "class_by_id"), "inline-small-table") << withFacts.dump(1);
  EXPECT_EQ(withFacts["inlined"]["class_by_id"].size(), 2u) << withFacts.dump(1);
  EXPECT_EQ(applied(withFacts, "stale_below"), "constant-key-lookup") << withFacts.dump(1);
  EXPECT_EQ(guardOf(withFacts, "snapshot_parity"), "in-program");
  EXPECT_EQ(guardOf(withFacts, "count_stale"), "in-program");
  EXPECT_EQ(withFacts["globals"],
            nlohmann::json::parse(
                R"([{"global": "drop_class", "offset": 0, "bytes": "05 00 00 00"}])"));

  write("");
  nlohmann::json withoutFacts = decisions();
  EXPECT_EQ(guardOf(withoutFacts, "snapshot_parity"), "tail call");
  EXPECT_EQ(guardOf(withoutFacts, "count_stale"), "none");
  EXPECT_EQ(applied(withoutFacts, "stale_below"), "none") << withoutFacts.dump(1);
  for (const std::string &path : {snapshot, object, report})
    unlink(path.c_str());
}

TEST(Cli, SnapshotGlobalsAndProgramsAreCheckedNamingFileMapAndOffset) {
  const std::string program = std::string(MORPHEUS_SOURCE_DIR) +
                              "/tests/programs/snapshot_parity.bpf.c";
  std::string snapshot = tempPath("parity-bad.json"), object = tempPath("parity-never.o");
  auto refused = [&](const std::string &document) {
    std::ofstream(snapshot) << document;
    Output out = morpheus("specialize " + program + " --snapshot " + snapshot + " -o " + object);
    EXPECT_EQ(out.status, 1) << out.text;
    EXPECT_NE(access(object.c_str(), F_OK), 0) << "nothing is written on bad input";
    return out.text;
  };
  std::string shorter = refused(R"({"maps": {"snapshot.data": [{"key": "00000000", "value": "0500"}]}})");
  EXPECT_NE(shorter.find(snapshot + ": map 'snapshot.data': value has 2 bytes, the section 4: "
                                    "global 'drop_class' at offset 0 (4 bytes) is not given"),
            std::string::npos)
      << shorter;
  std::string longer =
      refused(R"({"maps": {"snapshot.data": [{"key": "00000000", "value": "0500000000"}]}})");
  EXPECT_NE(longer.find(snapshot + ": map 'snapshot.data': value has 5 bytes, the section 4: "
                                   "nothing of the program lies at offset 4 and beyond"),
            std::string::npos)
      << longer;
  std::string slot =
      refused(R"({"maps": {"snapshot.data": [{"key": "01000000", "value": "05000000"}]}})");
  EXPECT_NE(slot.find("key 01 00 00 00: the section's map has one slot"), std::string::npos)
      << slot;
  std::string unknown = refused(R"({"maps": {"other.data": []}})");
  EXPECT_NE(unknown.find(snapshot + ": map 'other.data' is not a map of the program"),
            std::string::npos)
      << unknown;
  std::string noProgram =
      refused(R"({"maps": {}, "programs": {"elsewhere": {"verified_instructions": 10}}})");
  EXPECT_NE(noProgram.find(snapshot + ": program 'elsewhere': the object has no program"),
            std::string::npos)
      << noProgram;
  std::string notANumber =
      refused(R"({"maps": {}, "programs": {"snapshot_parity": {"fallback_slot": "0"}}})");
  EXPECT_NE(notANumber.find("program 'snapshot_parity': \"fallback_slot\" must be a number"),
            std::string::npos)
      << notANumber;
  unlink(snapshot.c_str());
}

TEST(Cli, ErrorsNameTheFileAndChangeNothing) {
  std::string snapshot = tempPath("bad.json"), object = tempPath("never.o");
  std::ofstream(snapshot) << R"({"maps": {"policy": [{"key": "0a00", "value": "00"}]}})";
  Output out = morpheus("specialize " + Example + " --snapshot " + snapshot + " -o " + object);
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find(snapshot + ": map 'policy' entry 0"), std::string::npos) << out.text;
  EXPECT_NE(access(object.c_str(), F_OK), 0) << "nothing is written on bad input";
  unlink(snapshot.c_str());

  Output missing = morpheus("analyze /nonexistent/prog.bpf.c");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.text.find("/nonexistent/prog.bpf.c: no such file"), std::string::npos);
  EXPECT_EQ(morpheus("frobnicate").status, 2);
  EXPECT_EQ(morpheus("run " + Example).status, 2) << "--iface is required";
}

// PROG is told by what it is before clang or the IR reader sees it: clang
// takes a file it cannot name for linker input and succeeds without
// output, which used to read as a broken "bitcode header".
TEST(Cli, WhatIsNotAProgramIsRefusedByName) {
  std::string directory = tempPath("progdir"), fifo = tempPath("fifo.c"),
              empty = tempPath("empty.c"), elf = tempPath("elf.c"), binary = tempPath("data"),
              noName = tempPath("prog"), fakeBitcode = tempPath("fake.bc");
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(empty).close();
  std::ofstream(elf) << "\x7f" "ELF\x02\x01\x01";
  std::ofstream(binary) << std::string("int x;\0\x01", 8);
  std::ofstream(noName) << "int x;\n";
  std::ofstream(fakeBitcode) << "int x;\n";
  const std::pair<std::string, std::string> cases[] = {
      {directory, ": is a directory, not a program (C, LLVM IR or bitcode)"},
      {"/dev/zero", ": not a regular file (a character device)"},
      {fifo, ": not a regular file (a FIFO)"},
      {empty, ": empty, not C, LLVM IR or bitcode"},
      {elf, ": an ELF object, not C, LLVM IR or bitcode"},
      {binary, ": binary data, not C, LLVM IR or bitcode"},
      {noName, ": not C, LLVM IR or bitcode by its name"},
      {fakeBitcode, ": not LLVM bitcode"}};
  for (const auto &[program, message] : cases) {
    Output out = morpheus("analyze " + program);
    EXPECT_EQ(out.status, 1) << out.text;
    EXPECT_EQ(out.text.rfind("morpheus: " + program + message, 0), 0u) << out.text;
  }
  rmdir(directory.c_str());
  for (const std::string &path : {fifo, empty, elf, binary, noName, fakeBitcode})
    unlink(path.c_str());
}

// A cache directory that cannot be written: one warning naming it and why,
// whatever is stored under it (clang's bitcode, the original's object),
// and the command succeeds without it.
TEST(Cli, AnUnwritableCacheDirectoryIsSaidOnce) {
  std::string file = tempPath("cache-file");
  std::ofstream(file) << "not a directory";
  Output out{-1, ""};
  std::string command = "MORPHEUS_CACHE_DIR=" + file + "/cache " + MORPHEUS_BIN_DIR +
                        "/morpheus analyze " + Example + " 2>&1 >/dev/null";
  FILE *pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer;
  while (size_t got = fread(buffer.data(), 1, buffer.size(), pipe))
    out.text.append(buffer.data(), got);
  out.status = WEXITSTATUS(pclose(pipe));
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(out.text, "morpheus: warning: cache directory " + file + "/cache: cannot create " +
                          file + "/cache/bitcode (Not a directory): going on without it (set "
                          "MORPHEUS_CACHE_DIR to a writable directory to keep what is built "
                          "across runs)\n");
  unlink(file.c_str());
}

TEST(Cli, BadSnapshotFilesAreRefusedByName) {
  std::string object = tempPath("never.o"), directory = tempPath("dir"),
              huge = tempPath("huge.json"), truncated = tempPath("truncated.json"),
              unknown = tempPath("unknown.json");
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  std::ofstream(huge).close(); // made huge and sparse: no disk used
  ASSERT_EQ(truncate(huge.c_str(), (off_t(1) << 30) + 1), 0);
  std::ofstream(truncated) << R"({"maps": {"policy": [{"key": )";
  std::ofstream(unknown) << R"({"maps": {"nosuch": []}})";
  const std::pair<std::string, std::string> cases[] = {
      {tempPath("missing.json"), ": cannot open: No such file"},
      {directory, ": not a regular file"},
      {huge, ": 1073741825 bytes; a snapshot larger than"},
      {truncated, ": not valid JSON"},
      {unknown, ": map 'nosuch' is not a map of the program"}};
  for (const auto &[snapshot, message] : cases) {
    Output out = morpheus("specialize " + Example + " --snapshot " + snapshot + " -o " + object);
    EXPECT_EQ(out.status, 1) << out.text;
    EXPECT_NE(out.text.find(snapshot + message), std::string::npos) << out.text;
    EXPECT_NE(access(object.c_str(), F_OK), 0) << "nothing is written on bad input";
  }
  rmdir(directory.c_str());
  for (const std::string &path : {huge, truncated, unknown})
    unlink(path.c_str());
}

TEST(Cli, HelpIsAvailableForEveryCommand) {
  for (const char *command :
       {"", "analyze ", "explain ", "specialize ", "run ", "map ", "map update ", "map delete ",
        "map dump ", "fuzz ", "bench ", "nf ", "nf router ", "nf router load-routes "}) {
    Output out = morpheus(std::string(command) + "--help");
    EXPECT_EQ(out.status, 0) << command;
    EXPECT_EQ(out.text.rfind("usage: morpheus " + std::string(command), 0), 0u)
        << command << "\n" << out.text;
  }
  Output help = morpheus("help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.text.find("Commands:\n  analyze"), std::string::npos) << help.text;
  // explain is listed, with what it says.
  EXPECT_NE(help.text.find("\n  explain "), std::string::npos) << help.text;
  Output top = morpheus("--help");
  EXPECT_NE(top.text.find("\n  explain "), std::string::npos) << top.text;
  Output bare = morpheus("");
  EXPECT_EQ(bare.status, 2) << "no command is a usage error";
  EXPECT_NE(bare.text.find("usage: morpheus"), std::string::npos) << bare.text;
}

// Usage mistakes exit with 2 and a message that names the command and the
// option or argument at fault, before anything runs.
TEST(Cli, UsageErrorsNameTheCommandAndTheOption) {
  const std::pair<std::string, std::string> cases[] = {
      {"run " + Example, "morpheus: run: --iface is required (or --adopt)"},
      {"run " + Example + " --iface lo --adopt 7",
       "morpheus: run: --iface attaches PROG, --adopt joins a program attached by another "
       "loader: give one of them"},
      {"run " + Example + " --iface lo --period 3h",
       "morpheus: run: --period: '3h' is not a duration like 1s or 250ms"},
      {"run " + Example + " --iface lo --xdp-mode turbo",
       "morpheus: run: --xdp-mode: 'turbo' is not one of generic, native"},
      {"run " + Example + " --iface lo --inline-limit many",
       "morpheus: run: could not convert: --inline-limit = many"},
      {"run " + Example + " --iface lo --shadow-packets -3",
       "morpheus: run: could not convert: --shadow-packets = -3"},
      {"run " + Example + " --iface", "morpheus: run: --iface: 1 required IF missing"},
      {"run " + Example + " other.c --iface lo", "morpheus: run: unexpected argument 'other.c'"},
      {"analyze " + Example + " --jsn", "morpheus: analyze: unknown option '--jsn'"},
      {"analyze", "morpheus: analyze: PROG is required"},
      {"specialize " + Example + " -o /tmp/never.o", "morpheus: specialize: --snapshot is required"},
      {"specialize " + Example + " --snapshot s.json -o /tmp/never.o --guard-version v1",
       "morpheus: specialize: could not convert: --guard-version = v1"},
      {"map update /sys/fs/bpf/none 00", "morpheus: map update: VALUE is required"},
      {"map update /sys/fs/bpf/none 00 00 --flags always",
       "morpheus: map update: --flags: 'always' is not one of any, exist, noexist"},
      {"map delete /sys/fs/bpf/none 00 --flags any", "morpheus: map delete: unknown option '--flags'"},
      {"map frobnicate", "morpheus: map: unknown command 'frobnicate'"},
      {"frobnicate", "morpheus: unknown command 'frobnicate'"},
      {"fuzz " + Example + " --seconds ten", "morpheus: fuzz: could not convert: --seconds = ten"},
      {"bench router --method fast", "morpheus: bench: --method: 'fast' is not one of driver, live"},
      {"bench router --locality ''", "morpheus: bench: no traces (give --locality, --phases or --trace)"},
      {"user-run --trace t.pcap --routes r.txt",
       "morpheus: user-run: --nf router needs --routes and --neighbors"},
      {"user-run --nf firewall --trace t.pcap", "morpheus: user-run: --nf firewall needs --rules"},
  };
  for (const auto &[arguments, message] : cases) {
    Output out = morpheus(arguments);
    EXPECT_EQ(out.status, 2) << arguments << "\n" << out.text;
    EXPECT_EQ(out.text.rfind(message, 0), 0u) << arguments << "\n" << out.text;
    EXPECT_NE(out.text.find("--help')"), std::string::npos) << "points at the help: " << out.text;
  }
}

} // namespace

// `morpheus user-run router` on a short trace from the router's trace
// generator: both versions run, the specialization is reported, the
// equivalence check covers every packet, and both rates are printed; the
// oracle and the nested-if generator's version beside them.
TEST(Cli, UserRunReplaysATraceThroughGenericAndSpecializedRouters) {
  const std::string source = MORPHEUS_SOURCE_DIR;
  std::string trace = tempPath("user-run.pcap");
  std::string generate = "python3 " + source + "/tools/traces/gen_trace.py --nf router --config " +
                         source + "/nf/router/configs/stanford-yozb-routes-20.txt --flows 50 " +
                         "--packets 2000 --locality low --seed 3 -q -o " + trace;
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  Output out = morpheus("user-run --routes " + source +
                        "/nf/router/configs/stanford-yozb-routes-20.txt --neighbors " + source +
                        "/nf/router/configs/stanford-neighbors.txt --trace " + trace +
                        " --rounds 1 --repeat 1 --lpm linear --oracle --batch-model --generator nested-if-lpm");
  std::remove(trace.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("20 routes (lpm_linear)"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("neighbors: inline-small-table"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("routes: lpm-as-code"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the first 2000 packets: generic and specialized identical"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("generic "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("specialized "), std::string::npos) << out.text;
  // The hand-specialized oracle, checked against the generic handler.
  EXPECT_NE(out.text.find("oracle: the routes as 20 compares"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the oracle treats them as the generic handler does"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("oracle "), std::string::npos) << out.text;
  // The registered generator's version: the routes as its nested ifs,
  // checked against the generic handler and timed.
  EXPECT_NE(out.text.find("user-run: nested-if-lpm in "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("routes: custom-generator"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the nested-if-lpm version treats them as the generic handler does"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("nested-if-lpm "), std::string::npos) << out.text;
  // The batching model with the router's prefetch function: fitted on
  // bursts and sub-batches, every (B, b) predicted beside measured, the
  // points it was not fitted on summed up, its pick against measurement's.
  EXPECT_NE(out.text.find("batch model: t(B) = "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("  sub-batches of b (b' = min(b, B)), prefetched: "),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("  fitted at 11 points (B = 8, 32, 128; b = none, 2, 8, B)"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("  B=256  b=none predicted "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("  B=256  b=16   predicted "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("  B=4    b=4    predicted "), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("  B=4    b=8 "), std::string::npos) << out.text; // b <= B
  EXPECT_NE(out.text.find("  B=32   b=8    predicted "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("  (fitted)\n"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("  the 25 points not fitted: predicted within "), std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the model picks B="), std::string::npos) << out.text;

  // The measured exploration: every trial printed, the chosen one, and the
  // chosen configuration checked against the generic handler.
  std::string explored = tempPath("user-run-explore.pcap");
  generate.replace(generate.find(trace), trace.size(), explored);
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  out = morpheus("user-run --routes " + source + "/nf/router/configs/stanford-yozb-routes-20.txt " +
                 "--neighbors " + source + "/nf/router/configs/stanford-neighbors.txt --trace " +
                 explored + " --rounds 1 --repeat 1 --explore greedy --explore-windows 1");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("explore (greedy search, 6 dimensions"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("lpm=dir24"), std::string::npos) << out.text; // --lpm's own kind
  EXPECT_NE(out.text.find("tried  burst=32 "), std::string::npos) << out.text; // the baseline
  EXPECT_NE(out.text.find("tried  burst=32 specialized=1 "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("tried  burst=128"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("lpm=linear"), std::string::npos) << out.text; // the other templates
#ifdef MORPHEUS_WITH_DPDK
  EXPECT_NE(out.text.find("lpm=rte"), std::string::npos) << out.text;
#endif
  EXPECT_NE(out.text.find("lpm_as_code=1"), std::string::npos) << out.text; // routes as code
  EXPECT_NE(out.text.find("lpm_as_array=1"), std::string::npos) << out.text; // a derived table
  EXPECT_NE(out.text.find("prefetch=4"), std::string::npos) << out.text; // sub-batches
  EXPECT_NE(out.text.find("chosen burst="), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the chosen configuration treats the first 2000 packets as the "
                          "generic handler does"),
            std::string::npos)
      << out.text;

  // Exploration after the batching model: only the bursts and sub-batches
  // it predicts near its pick are tried (the baseline's burst besides),
  // and what was measured confirms or overrides the pick.
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  out = morpheus("user-run --routes " + source + "/nf/router/configs/stanford-yozb-routes-20.txt " +
                 "--neighbors " + source + "/nf/router/configs/stanford-neighbors.txt --trace " +
                 explored + " --rounds 1 --repeat 1 --batch-model --explore greedy " +
                 "--explore-windows 1");
  std::remove(explored.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  size_t pruned = out.text.find("explore: the batch model's pick B=");
  ASSERT_NE(pruned, std::string::npos) << out.text;
  size_t listed = out.text.find("bursts ", pruned), listEnd = out.text.find(" (32 the", listed);
  ASSERT_NE(listEnd, std::string::npos) << out.text;
  std::set<std::string> allowed;
  std::stringstream bursts(out.text.substr(listed + 7, listEnd - listed - 7));
  for (std::string burst; std::getline(bursts, burst, ',');)
    allowed.insert(burst.substr(burst.find_first_not_of(' ')));
  EXPECT_TRUE(allowed.count("32")) << out.text; // the baseline's
  for (size_t tried = out.text.find("tried  burst="); tried != std::string::npos;
       tried = out.text.find("tried  burst=", tried + 1)) {
    size_t value = tried + 13;
    EXPECT_TRUE(allowed.count(out.text.substr(value, out.text.find(' ', value) - value)))
        << "a burst the model did not predict near its pick: " << out.text.substr(tried, 40);
  }
  EXPECT_TRUE(out.text.find("the batch model's pick B=") != std::string::npos &&
              (out.text.find(": confirmed by the exploration") != std::string::npos ||
               out.text.find(": overridden by the exploration (burst=") != std::string::npos))
      << out.text;

  // Following the traffic: 500 routes (over the inline limit, and kept out
  // of a derived table by --no-pass) scanned linearly, their lookup
  // instrumented, then a fast path for the heavy
  // hitters of a high-locality trace, timed as a third version and checked
  // against the generic twin.
  std::string followed = tempPath("user-run-profile.pcap");
  std::string generate500 = "python3 " + source + "/tools/traces/gen_trace.py --nf router " +
                            "--config " + source + "/nf/router/configs/stanford-yozb-routes-500.txt " +
                            "--flows 50 --packets 2000 --locality high --seed 3 -q -o " + followed;
  ASSERT_EQ(std::system(generate500.c_str()), 0) << generate500;
  out = morpheus("user-run --routes " + source + "/nf/router/configs/stanford-yozb-routes-500.txt " +
                 "--neighbors " + source + "/nf/router/configs/stanford-neighbors.txt --trace " +
                 followed + " --rounds 1 --repeat 1 --lpm linear --profile naive --no-pass lpm-as-array");
  std::remove(followed.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("routes: instrument-table-sites"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("(routes): "), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("(routes): 0 hot keys"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("fast paths "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("generic and specialized identical"), std::string::npos) << out.text;

  Output missing = morpheus("user-run --routes /nonexistent --neighbors x --trace y");
  EXPECT_EQ(missing.status, 1) << missing.text;
  EXPECT_NE(missing.text.find("/nonexistent"), std::string::npos) << missing.text;
}

// `morpheus user-run --nf firewall` on a ClassBench rule file and a trace
// from the firewall's trace generator: the same code path as the router's,
// with the firewall's tables: specialized, fast paths for the hot flows,
// the hand-specialized oracle (the rules as compares), exploration, every
// version checked against the generic twin; errors name the file.
TEST(Cli, UserRunReplaysATraceThroughGenericAndSpecializedFirewalls) {
  const std::string source = MORPHEUS_SOURCE_DIR;
  const std::string rules = source + "/nf/firewall/configs/classbench-fw1-449-rules.txt";
  std::string trace = tempPath("user-run-firewall.pcap");
  std::string generate = "python3 " + source + "/tools/traces/gen_trace.py --nf firewall " +
                         "--config " + rules + " --flows 50 --packets 2000 --locality high " +
                         "--seed 3 -q -o " + trace;
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  Output out = morpheus("user-run --nf firewall --rules " + rules + " --trace " + trace +
                        " --rounds 1 --repeat 1 --profile adaptive --oracle");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("firewall_user.c, 449 rules (lpm_dir24 prefixes: "), std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the first 2000 packets: generic and specialized identical"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("fast paths "), std::string::npos) << out.text;
  // High locality: the trace's 5 flows are all hot.
  EXPECT_NE(out.text.find("oracle: the rules as 449 compares, 5 hot flows first"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the oracle treats them as the generic handler does"),
            std::string::npos)
      << out.text;

  out = morpheus("user-run --nf firewall --rules " + rules + " --trace " + trace +
                 " --rounds 1 --repeat 1 --lpm linear --explore greedy --explore-windows 1");
  std::remove(trace.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("(lpm_linear prefixes: "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("lpm=dir24"), std::string::npos) << out.text; // the other template
  EXPECT_NE(out.text.find("chosen burst="), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the chosen configuration treats the first 2000 packets as the "
                          "generic handler does"),
            std::string::npos)
      << out.text;

  Output missing = morpheus("user-run --nf firewall --rules /nonexistent --trace y");
  EXPECT_EQ(missing.status, 1) << missing.text;
  EXPECT_NE(missing.text.find("/nonexistent"), std::string::npos) << missing.text;
}

#ifdef MORPHEUS_WITH_DPDK
// DPDK's tables from the command line: the router with its routes on
// rte_lpm and its neighbours on rte_hash, also timed through a DPDK port
// (the tables and the port on the process's one EAL), the NAT with its
// bindings on rte_hash; each specialized (the router explored too) and
// checked against its generic twin (the oracle too, for the NAT, table by
// table).
TEST(Cli, UserRunOnDpdksTables) {
  const std::string source = MORPHEUS_SOURCE_DIR;
  std::string trace = tempPath("user-run-rte.pcap");
  std::string generate = "python3 " + source + "/tools/traces/gen_trace.py --nf router --config " +
                         source + "/nf/router/configs/stanford-yozb-routes-20.txt --flows 50 " +
                         "--packets 2000 --locality high --seed 3 -q -o " + trace;
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  Output out = morpheus("user-run --routes " + source +
                        "/nf/router/configs/stanford-yozb-routes-20.txt --neighbors " + source +
                        "/nf/router/configs/stanford-neighbors.txt --trace " + trace +
                        " --rounds 1 --repeat 1 --lpm rte --hash rte --profile adaptive "
                        "--explore greedy --explore-windows 1 --dpdk");
  std::remove(trace.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("20 routes (lpm_rte), "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find(" neighbours (rte_hash), "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("routes: lpm-as-code"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the first 2000 packets: generic and specialized identical"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("lpm=dir24"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("lpm=linear"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the chosen configuration treats the first 2000 packets as the "),
            std::string::npos)
      << out.text;
  // The tables and the net_pcap port on one EAL, sized for the port first.
  EXPECT_NE(out.text.find("dpdk generic "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("dpdk specialized "), std::string::npos) << out.text;

  const std::string config = source + "/nf/nat/configs/nat.conf";
  trace = tempPath("user-run-nat-rte.pcap");
  generate = "python3 " + source + "/tools/traces/gen_trace.py --nf nat --config " + config +
             " --flows 50 --packets 2000 --locality high --seed 3 -q -o " + trace;
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  out = morpheus("user-run --nf nat --config " + config + " --trace " + trace +
                 " --rounds 1 --repeat 1 --hash rte --profile adaptive --oracle");
  std::remove(trace.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("outside port 1, bindings (rte_hash)"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("nat_out: guard-table-writes"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the first 2000 packets: generic and specialized identical"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the oracle treats them as the generic handler does (tables too)"),
            std::string::npos)
      << out.text;
}
#endif

// `morpheus user-run --nf nat` on the NAT's own configuration and a trace
// from its trace generator (outbound flows from inside hosts): the
// configuration folded, the inside prefixes as code, the binding tables
// the handler writes counted and given fast paths, the oracle (the
// configuration as constants) checked packet by packet and table by table,
// exploration; a bad file is named with its line.
TEST(Cli, UserRunReplaysATraceThroughGenericAndSpecializedNats) {
  const std::string source = MORPHEUS_SOURCE_DIR;
  const std::string config = source + "/nf/nat/configs/nat.conf";
  std::string trace = tempPath("user-run-nat.pcap");
  std::string generate = "python3 " + source + "/tools/traces/gen_trace.py --nf nat --config " +
                         config + " --flows 50 --packets 2000 --locality high --seed 3 -q -o " +
                         trace;
  ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
  Output out = morpheus("user-run --nf nat --config " + config + " --trace " + trace +
                        " --rounds 1 --repeat 1 --profile adaptive --oracle --explore greedy "
                        "--explore-windows 1");
  std::remove(trace.c_str());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("nat_user.c, 2 inside prefixes (lpm_dir24), 2 external addresses, "
                          "ports 20000-59999, inside port 0, outside port 1"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("nat_config: constant-key-lookup"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("nat_inside: lpm-as-code"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("nat_out: guard-table-writes"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("(nat_out): "), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("(nat_out): 0 hot keys"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the first 2000 packets: generic and specialized identical"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("oracle: the configuration as constants (2 inside prefixes as "
                          "compares, 2 external addresses)"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("the oracle treats them as the generic handler does (tables too)"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("chosen burst="), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the chosen configuration treats the first 2000 packets as the "
                          "generic handler does"),
            std::string::npos)
      << out.text;

  std::string bad = tempPath("bad-nat.conf");
  std::ofstream(bad) << "inside 10.0.0.0/8\nexternal 10.1.2.3\nports 1-2\ninside-port a\n"
                       "outside-port b next-hop=02:00:00:00:00:01\n";
  Output refused = morpheus("user-run --nf nat --config " + bad + " --trace y");
  std::remove(bad.c_str());
  EXPECT_EQ(refused.status, 1) << refused.text;
  EXPECT_NE(refused.text.find(bad + ":2: external: 10.1.2.3 lies in the inside prefix"),
            std::string::npos)
      << refused.text;
  Output missing = morpheus("user-run --nf nat --trace y");
  EXPECT_NE(missing.status, 0) << missing.text;
  EXPECT_NE(missing.text.find("--nf nat needs --config"), std::string::npos) << missing.text;
}
