// A doctest listener that prints every skipped test case with its reason, one line each:
//   skipped: <test case>: <reason>
// (tests/run_tests.py repeats these lines). Include it in exactly one file of each test runner,
// the one with main().
#pragma once

#include <doctest/doctest.h>

#include <iostream>
#include <string>

namespace tilus::testing {

/// The reason printed for cases that a runner filters out (rather than marks skipped); empty:
/// cases filtered out by the command line (-tc=...) are not listed.
inline std::string &runnerSkipReason() {
  static std::string reason;
  return reason;
}

struct SkipListener : doctest::IReporter {
  explicit SkipListener(const doctest::ContextOptions &options) : out(*options.cout) {}

  void test_case_skipped(const doctest::TestCaseData &tc) override {
    if (tc.m_description)
      out << "skipped: " << tc.m_name << ": " << tc.m_description << std::endl;
    else if (!runnerSkipReason().empty())
      out << "skipped: " << tc.m_name << ": " << runnerSkipReason() << std::endl;
  }

  void report_query(const doctest::QueryData &) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats &) override {}
  void test_case_start(const doctest::TestCaseData &) override {}
  void test_case_reenter(const doctest::TestCaseData &) override {}
  void test_case_end(const doctest::CurrentTestCaseStats &) override {}
  void test_case_exception(const doctest::TestCaseException &) override {}
  void subcase_start(const doctest::SubcaseSignature &) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData &) override {}
  void log_message(const doctest::MessageData &) override {}

private:
  std::ostream &out;
};

DOCTEST_REGISTER_LISTENER("skips", 1, SkipListener);

} // namespace tilus::testing
