#pragma once
// The channel study (split-prefill and state swap): tasks x seeds x items x conditions on one
// model, greedy generation with the family's end-of-turn tokens as stop ids, scored by each
// task's scorer, one record per (task, seed, item, condition) appended to items.jsonl, then
// summaries computed from that file (experiments/summary.hpp).
//
// Throughput: items of a task whose context and query segments have the same token lengths
// (and the same conditions still to run) are run as one batch: one prefill of the contexts
// [B, n] (and of the B sources), then per condition one edited copy of that cache and one
// generation of the queries [B, m]. Each row is computed as it would be alone; rows that hit
// a stop id early are cut there. StudyOptions::batch = 1 runs one item at a time.
//
// Sharding: the (task, seed, item) triples are numbered in study order (tasks as listed, seeds
// as listed, items 0..N-1); shard I of N takes those whose number is I mod N.
//
// Non-finite check: with StudyOptions::check_finite (the default) every forward of the study,
// prefill and generation, runs with ForwardOptions::check_finite, so a model that produces a
// NaN or infinity stops the run with a NonFiniteError naming the layer and site; no summary is
// written and run.json stays "running".
//
// Judge: StudyOptions::judge (may be null) is handed to every scorer (the persona task asks it
// instead of its rule rubric); each record's "scored_by" says "judge" when the judge decided
// its score and "rubric" when a rule rubric did (tasks without either have no such field).
//
// Crash safety: records are appended as whole lines after each batch and condition, and
// fsynced at most once a second (LineAppender); resume drops a torn last line and skips the
// (task, seed, item, condition) keys already on disk. A record on disk twice, or one this
// study does not make in this shard (an edited seed, another shard's item), is a FormatError
// before any forward. A finished run rewrites items.jsonl in canonical order (task, seed,
// item, condition order), atomically, and writes the summaries and run.json.
//
// Memory: the study keeps of each record only what its summaries read (ScoreRecords: the key,
// the scores, the item group; about 100 bytes), not its context and generation; items.jsonl is
// read and rewritten line by line (rewrite_items_canonical). A record is 2-7 KB as a JSON
// object, so a study of a million records (every --layers sweep on a 24-layer model) held them
// whole in 7-18 GB.

#include <algorithm>    // std::find
#include <chrono>       // std::chrono
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint64_t
#include <ctime>        // std::time
#include <filesystem>   // std::filesystem
#include <map>          // std::map
#include <set>          // std::set
#include <string>       // std::string
#include <vector>       // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../stack/generate.hpp"
#include "../stack/tokens.hpp"
#include "../tasks/task.hpp"
#include "../text/tokenizer.hpp"
#include "condition_cache.hpp"
#include "folder_lock.hpp"
#include "conditions.hpp"
#include "progress.hpp"
#include "prompt.hpp"
#include "records.hpp"
#include "study_folder.hpp"  // Shard, parse_shard, detail::read_json_file, detail::utc_now
#include "summary.hpp"

namespace hylens::experiments {

struct StudyOptions {
    std::vector<const tasks::TaskSpec*> tasks;
    std::vector<Condition> conditions;  ///< as listed (before the --layers expansion)
    LayerSpec layers;                   ///< the layer sweeps
    std::size_t items = 600;            ///< per task and seed
    std::vector<std::uint64_t> seeds = {1, 2, 3};
    std::size_t max_new = 0;            ///< tokens to generate (0: each task's default)
    Shard shard;
    bool resume = false;
    std::size_t batch = 16;             ///< most items per forward
    std::filesystem::path out;
    tasks::Judge* judge = nullptr;
    /// What the judge is, for run.json (e.g. {"model": DIR}, as study_judge_info makes it);
    /// null when there is no judge (run.json then says "rubric"). The study definition names it
    /// by content (identity_by_contents: each input path its digest).
    nlohmann::json judge_info = nullptr;
    bool check_finite = true;           ///< the non-finite check on every forward (see above)
    bool progress = true;
    BootstrapOptions bootstrap{};
    nlohmann::json run_info = nlohmann::json::object();  ///< merged into run.json (model, arguments, version, ...)
};

struct StudyResult {
    std::size_t records = 0;        ///< records in items.jsonl at the end
    std::size_t written = 0;        ///< written by this call
    std::size_t resumed = 0;        ///< found on disk and kept
    std::size_t skipped_items = 0;  ///< swap items whose A and B differ in token length
    double seconds = 0.0;
};

/// The study-defining part of run.json (a resumed run must match it).
inline nlohmann::json study_definition(const StudyOptions& o, const std::vector<Condition>& expanded) {
    nlohmann::json tasks = nlohmann::json::array(), conds = nlohmann::json::array();
    for (const auto* t : o.tasks) tasks.push_back(t->name);
    for (const auto& c : expanded) conds.push_back(c.name());
    nlohmann::json d = {{"tasks", tasks}, {"conditions", conds}, {"items", o.items},  {"seeds", o.seeds},
                        {"max_new", o.max_new}, {"shard", o.shard.text()}};
    // Only a judged study names its judge (a resumed run must use the same one), by content:
    // a judge retrained in place is another study, a copy elsewhere the same. The definitions
    // of rubric-scored studies stay as they were.
    if (o.judge) d["judge"] = o.judge_info.is_null() ? nlohmann::json("unnamed") : identity_by_contents(o.judge_info);
    return d;
}

namespace detail {

struct Work {
    std::size_t task = 0;  // index into options.tasks
    tasks::Item item;
    RenderedItem ids;
    std::vector<std::size_t> pending;  // condition indices still to run
};

/// "judge" when the judge decided a score (its scorer recorded the judge's answer), "rubric"
/// when a rule rubric did, null for tasks scored otherwise.
inline const char* scored_by(const tasks::Score& s) {
    if (s.fields.contains("judge")) return "judge";
    if (s.fields.contains("rubric")) return "rubric";
    return nullptr;
}

}  // namespace detail

/// The study's tasks, each once: a task listed twice queued its items twice (duplicate records,
/// counted twice by the summaries).
inline void check_distinct_tasks(const std::vector<const tasks::TaskSpec*>& tasks) {
    for (std::size_t i = 0; i < tasks.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            check(tasks[i]->name != tasks[j]->name, "[experiment] task ", tasks[i]->name, " is listed twice");
}

/// Runs the study of `opt` on a typed model (a CausalLM) with its tokenizer and chat family.
template <class Model>
StudyResult run_channel_study(const Model& model, const Tokenizer& tok, ChatFamily family, const StudyOptions& opt) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    namespace fs = std::filesystem;
    using Cache = typename Model::cache_type;
    check(!opt.tasks.empty(), "[experiment] no task");
    check(!opt.conditions.empty(), "[experiment] no condition");
    check(!opt.seeds.empty(), "[experiment] no seed");
    check(opt.items >= 1, "[experiment] --items must be at least 1");
    check(opt.batch >= 1, "[experiment] batch must be at least 1");
    // A seed or task listed twice queued its items twice: duplicate records in items.jsonl,
    // counted twice by the summaries.
    check_distinct_seeds(opt.seeds, "experiment");
    check_distinct_tasks(opt.tasks);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> left_out;  // (condition, --layers set) pairs that edit nothing
    const std::vector<Condition> conds =
        expand_conditions(opt.conditions, opt.layers, channel_layers(model.new_cache(1)), &left_out);
    std::vector<std::string> cond_names;
    for (const auto& c : conds) cond_names.push_back(c.name());
    const PromptRenderer renderer(tok, family);

    // Output folder, run.json, resume.
    const FolderLock lock(opt.out, "experiment");  // makes the folder
    const fs::path items_path = opt.out / "items.jsonl", run_path = opt.out / "run.json";
    const nlohmann::json definition = study_definition(opt, conds);
    nlohmann::json run_info = with_run_inputs(opt.run_info);  // what was read, by content, and how it computed
    nlohmann::json prev_run;  // the run.json of the records resumed
    if (opt.resume && fs::exists(run_path)) {
        const nlohmann::json prev = detail::read_run_json(run_path, "[experiment] --resume: ");
        prev_run = prev;
        check(prev.value("study", nlohmann::json()) == definition, "[experiment] --resume: ", run_path.string(),
              " describes another study: ", detail::definition_difference(prev.value("study", nlohmann::json()), definition),
              " (there and here); resume with the same settings or choose another output folder");
        detail::check_same_inputs(prev, run_info, run_path, "experiment");
        detail::check_items_unchanged(prev, items_path, "[experiment] --resume: ");
        detail::keep_unverified(prev, run_info);
    } else if (opt.resume) {
        detail::check_no_orphan_records(items_path, "experiment");
    } else {
        check(!fs::exists(items_path) || fs::file_size(items_path) == 0, "[experiment] ", items_path.string(),
              " already exists: continue it with --resume (Python: resume=True) or choose another output folder");
    }
    // What the summaries read of every record, those on disk first.
    ScoreRecords scores;
    std::set<RecordKey> done;
    if (opt.resume)
        for_each_jsonl_line(items_path, true, [&](std::size_t line, std::string_view text, std::uint64_t) {
            const std::string where = items_path.string() + " line " + std::to_string(line);
            const nlohmann::json r = parse_jsonl_line(text, where);
            const RecordKey k = record_key(r, where);
            check_record_score(r, where);
            check<FormatError>(done.insert(k).second, "[experiment] ", items_path.string(), " holds record (", k.task,
                               ", seed ", k.seed, ", item ", k.item, ", ", k.condition, ") twice");
            scores.add(r, where);
        });

    nlohmann::json run = run_info;
    run["study"] = definition;
    run["chat_family"] = family_name(family);
    run["num_layers"] = model.num_layers();  // the plots' cumulative-top sweeps end at its last layer
    // The --layers sweeps run, so a plot draws each set in the sweeps it was run for only.
    nlohmann::json sweeps = nlohmann::json::array();
    if (opt.layers.single) sweeps.push_back("single");
    if (opt.layers.cumulative) sweeps.push_back("cumulative");
    if (opt.layers.cumulative_top) sweeps.push_back("cumulative-top");
    run["layer_sweeps"] = sweeps;
    run["layers_left_out"] = left_out;
    run["stop_ids"] = renderer.stop_ids();
    run["batch"] = opt.batch;
    run["judge"] = opt.judge ? (opt.judge_info.is_null() ? nlohmann::json("unnamed") : opt.judge_info) : nlohmann::json("rubric");
    run["check_finite"] = opt.check_finite;
    run["status"] = "running";
    run["started"] = detail::utc_now();
    for (const std::string& note : left_out) std::fprintf(stderr, "[experiment] note: %s\n", note.c_str());

    // The work list of this shard, and every key it makes (a resumed record must be one).
    std::vector<detail::Work> work;
    std::set<RecordKey> makes;
    nlohmann::json skipped = nlohmann::json::array();
    std::size_t number = 0, total = 0;
    // A swap item whose contexts differ in token length is left out only where a condition
    // reads its B context: its records are then left out for every condition, so each
    // comparison stays paired. Without a swap condition every item runs.
    const bool pairs_b = std::any_of(conds.begin(), conds.end(), [](const Condition& c) { return c.needs_b(); });
    for (std::size_t t = 0; t < opt.tasks.size(); ++t) {
        const tasks::TaskSpec& spec = *opt.tasks[t];
        for (const std::uint64_t seed : opt.seeds)
            for (std::size_t i = 0; i < opt.items; ++i, ++number) {
                if (!opt.shard.takes(number)) continue;
                detail::Work w{t, spec.make(seed, i), {}, {}};
                // Records carry the registry name (a task variant may share its generator's items).
                check(w.item.seed == seed && w.item.index == i, "[experiment] task ", spec.name, ": make(", seed, ", ", i,
                      ") returned the item of seed ", w.item.seed, ", index ", w.item.index);
                w.ids = renderer.render(w.item, spec.swap);
                if (spec.swap && pairs_b && w.ids.alt_context.size() != w.ids.context.size()) {
                    skipped.push_back({{"task", spec.name}, {"seed", seed}, {"item", i},
                                       {"reason", "context A has " + std::to_string(w.ids.context.size()) +
                                                      " tokens, context B " + std::to_string(w.ids.alt_context.size())}});
                    continue;
                }
                for (std::size_t c = 0; c < conds.size(); ++c) {
                    if (conds[c].needs_b() && !spec.swap) continue;
                    RecordKey k{spec.name, seed, i, cond_names[c]};
                    if (!done.count(k)) w.pending.push_back(c);
                    if (!done.empty()) makes.insert(std::move(k));
                }
                total += w.pending.size();
                if (!w.pending.empty()) work.push_back(std::move(w));
            }
    }

    // A record hand-edited to another seed or item, or another shard's, would be summarised as
    // if this study had made it.
    for (const RecordKey& k : done)
        check<FormatError>(makes.count(k) != 0, "[experiment] --resume: ", items_path.string(), " holds record (", k.task,
                           ", seed ", k.seed, ", item ", k.item, ", ", k.condition, "), which this study does not make in shard ",
                           opt.shard.text(), " (another task, seed, item, condition or shard, or a swap item left out for its "
                           "lengths): the file was edited or comes from another run; remove that line or resume in the folder "
                           "that run wrote");
    // Only now is the folder this run's: a refused resume leaves a finished run.json as it was,
    // and so does a resume with nothing left to run, killed before its end (marked running, the
    // folder lost its items fingerprint, and an edited record then passed the next resume).
    const nlohmann::json now_level = run.value("simd", nlohmann::json());
    if (scores.size() == 0) prev_run = nullptr;  // no record of its: the folder is this run's alone
    if (!prev_run.is_null()) detail::resumed_simd(run, prev_run, now_level, total > 0);
    if (total > 0 || scores.size() == 0)
        write_file_atomic(run_path, run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");

    // Batches: same task, token lengths and pending conditions, in work order.
    std::map<std::tuple<std::size_t, std::size_t, std::size_t, std::vector<std::size_t>>, std::vector<std::size_t>> groups;
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t, std::vector<std::size_t>>> group_order;
    for (std::size_t k = 0; k < work.size(); ++k) {
        auto key = std::make_tuple(work[k].task, work[k].ids.context.size(), work[k].ids.query.size(), work[k].pending);
        auto [it, fresh] = groups.try_emplace(key);
        if (fresh) group_order.push_back(key);
        it->second.push_back(k);
    }

    StudyResult result;
    result.resumed = scores.size();
    result.skipped_items = skipped.size();
    Progress progress(total, "experiment " + opt.shard.text(), opt.progress);
    LineAppender out(items_path);
    for (const auto& key : group_order) {
        const std::vector<std::size_t>& members = groups[key];
        const tasks::TaskSpec& spec = *opt.tasks[std::get<0>(key)];
        const std::size_t max_new = opt.max_new ? opt.max_new : spec.max_new;
        for (std::size_t b0 = 0; b0 < members.size(); b0 += opt.batch) {
            const std::size_t b1 = std::min(members.size(), b0 + opt.batch);
            std::vector<std::vector<std::int64_t>> ctx, alt, qry;
            for (std::size_t k = b0; k < b1; ++k) {
                const detail::Work& w = work[members[k]];
                ctx.push_back(w.ids.context);
                qry.push_back(w.ids.query);
                if (spec.swap) alt.push_back(w.ids.alt_context);
            }
            const std::vector<std::size_t>& pending = std::get<3>(key);
            bool need_b = false;
            for (std::size_t c : pending) need_b = need_b || conds[c].needs_b();
            ForwardOptions fo;
            fo.check_finite = opt.check_finite;
            const Cache a = model.prefill(TokenBatch(ctx), fo);
            const Cache b = need_b ? model.prefill(TokenBatch(alt), fo) : Cache();
            const TokenBatch query(qry);
            for (const std::size_t c : pending) {
                const Condition& cond = conds[c];
                EditedCache<Cache> e = condition_cache(cond, a, need_b ? &b : nullptr);
                GenerateOptions g;
                g.max_new = max_new;
                g.stop_ids = renderer.stop_ids();
                g.start_position = e.position;
                g.check_finite = opt.check_finite;
                g.keep_logits = false;  // the records hold the ids alone
                const GenerateResult r = generate(model, e.cache, query, g);
                for (std::size_t k = b0; k < b1; ++k) {
                    const detail::Work& w = work[members[k]];
                    const auto [ids, stopped] = renderer.until_stop(r.ids[k - b0]);
                    const std::string text = renderer.decode(ids);
                    const tasks::Score s = spec.score(w.item, text, cond.score_context(), opt.judge);
                    nlohmann::json rec = {{"task", spec.name},
                                          {"seed", w.item.seed},
                                          {"item", w.item.index},
                                          {"condition", cond.name()},
                                          {"context", w.item.context},
                                          {"query", w.item.query},
                                          {"expected", w.item.expected}};
                    if (spec.swap) {
                        rec["alt_context"] = w.item.alt_context;
                        rec["alt_expected"] = w.item.alt_expected;
                    }
                    rec["generated"] = text;
                    rec["generated_ids"] = ids;
                    rec["stopped"] = stopped;
                    rec["score"] = s.score;
                    if (const char* by = detail::scored_by(s)) rec["scored_by"] = by;
                    if (w.ids.first_a) rec["first_token"] = !r.ids[k - b0].empty() && r.ids[k - b0][0] == *w.ids.first_a;
                    if (w.ids.first_b) rec["first_token_b"] = !r.ids[k - b0].empty() && r.ids[k - b0][0] == *w.ids.first_b;
                    rec["context_tokens"] = w.ids.context.size();
                    rec["query_tokens"] = w.ids.query.size();
                    rec["query_position"] = e.position;
                    rec["item_fields"] = w.item.fields;
                    rec["score_fields"] = s.fields;
                    out.add(json_line(rec));
                    scores.add(rec);
                    ++result.written;
                }
                out.sync();
                progress.add(b1 - b0);
            }
        }
    }
    progress.finish();
    out.close();

    // Canonical items.jsonl, summaries, run.json.
    run[detail::kItemsFingerprintKey] = rewrite_items_canonical(items_path, cond_names);
    std::vector<nlohmann::json> skipped_items = skipped.get<std::vector<nlohmann::json>>();
    detail::sort_skipped(skipped_items);  // the order of a merge's skipped.jsonl
    write_file_atomic(opt.out / "skipped.jsonl", detail::jsonl_text(skipped_items));
    const auto t_gen = std::chrono::steady_clock::now();
    write_summaries(opt.out, scores, cond_names, opt.bootstrap);
    const auto t_end = std::chrono::steady_clock::now();
    result.records = scores.size();
    result.seconds = std::chrono::duration<double>(t_end - t0).count();
    if (!prev_run.is_null()) detail::resumed_simd(run, prev_run, now_level, result.written > 0);
    run["status"] = "complete";
    run["finished"] = detail::utc_now();
    run["records"] = result.records;
    run["skipped_items"] = result.skipped_items;
    const double gen_s = std::chrono::duration<double>(t_gen - t0).count();
    run["timings"] = {{"seconds", result.seconds},
                      {"generation_seconds", gen_s},
                      {"summary_seconds", std::chrono::duration<double>(t_end - t_gen).count()},
                      {"records_written", result.written},
                      {"records_per_second", gen_s > 0 ? static_cast<double>(result.written) / gen_s : 0.0}};
    write_file_atomic(run_path, run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    return result;
}

}  // namespace hylens::experiments
