// Forward mode over the op registry: every op and sample through jvpcheck (engine/autograd/
// gradcheck.h): the tangent against central differences, against the reverse-mode Jacobian (the
// transpose identity) and against a run where no input requires grad.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "ops/ops.h"

TEST_CASE("registry: jvpcheck of every op and sample (forward mode)") {
  const gs::RandomKey key{1234, 1};
  int checked = 0;
  std::map<std::string, int> ops_by_kind;
  for (const auto& info : gs::OpRegistry::all()) {
    for (const auto& smp : info.samples(key)) {
      INFO("op '" << info.name << "', sample '" << smp.label << "'");
      gs::GradcheckReport rep;
      try {
        rep = gs::jvpcheck(info.fn, smp.inputs, info.tolerances);
      } catch (const std::exception& e) {
        rep.ok = false;
        rep.failure = std::string("threw: ") + e.what();
      }
      CHECK_MESSAGE(rep.ok, "jvpcheck failed: " << rep.failure << " (rules used: " << rep.detail << ")");
      ++checked;
    }
    ++ops_by_kind[gs::forward_ad::rule_kind(info.name)];
  }
  CHECK(checked >= static_cast<int>(gs::OpRegistry::all().size()));
  MESSAGE("registry ops by JVP rule (by name; views are recognised by their outputs): written "
          << ops_by_kind["written"] << ", diagonal " << ops_by_kind["diagonal"] << ", derived or view "
          << ops_by_kind["derived"]);
}
