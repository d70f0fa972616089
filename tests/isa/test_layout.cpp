// Register layouts (ISA section 3.1) against independent references: the closed-form reference
// values of the ISA, and a brute-force model in which a layout is its full function table
// (primitives from their definitions, products from the Kronecker formula). Properties are
// checked over every chain of up to three primitives over small sizes, and tryCreate over every
// unified form of up to four size-2 modes of rank 2.
#include "isa/layout.h"
#include "tests/test_helpers.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <numeric>

using namespace tilus;

namespace {

// ---------------------------------------------------------------------------------------------
// Brute-force model: a layout is the table of L(t, i) for every t < T, i < N.

struct Table {
  int rank = 0; // -1: unranked (a product of replicates only)
  std::vector<int64_t> shape;
  int64_t threads = 1, locals = 1;
  std::vector<int64_t> cells; // (t * locals + i) * rank + d

  int width() const { return std::max(rank, 0); }
  int64_t at(int64_t t, int64_t i, int d) const { return cells[(t * locals + i) * width() + d]; }
  std::vector<int64_t> index(int64_t t, int64_t i) const {
    std::vector<int64_t> x(static_cast<size_t>(width()));
    for (int d = 0; d < width(); ++d)
      x[d] = at(t, i, d);
    return x;
  }
  std::vector<int64_t> key() const {
    std::vector<int64_t> k{rank, threads, locals};
    k.insert(k.end(), shape.begin(), shape.end());
    k.push_back(-7);
    k.insert(k.end(), cells.begin(), cells.end());
    return k;
  }
  friend bool operator==(const Table &, const Table &) = default;
};

std::vector<int64_t> ones(int rank) { return std::vector<int64_t>(size_t(std::max(rank, 0)), 1); }

int64_t prod(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t(1), std::multiplies<>());
}

std::vector<int64_t> unravel(int64_t v, const std::vector<int64_t> &n, bool column) {
  std::vector<int64_t> x(n.size());
  if (column) {
    for (size_t d = 0; d < n.size(); ++d) {
      x[d] = v % n[d];
      v /= n[d];
    }
  } else {
    for (size_t d = n.size(); d-- > 0;) {
      x[d] = v % n[d];
      v /= n[d];
    }
  }
  return x;
}

enum class Kind { Local, ColumnLocal, Spatial, ColumnSpatial, Replicate };

struct Prim {
  Kind kind;
  std::vector<int64_t> n; // replicate: {k}
};

using Chain = std::vector<Prim>;

Table refPrimitive(const Prim &p) {
  Table t;
  if (p.kind == Kind::Replicate) {
    t.rank = -1;
    t.threads = p.n[0];
    return t;
  }
  t.rank = int(p.n.size());
  t.shape = p.n;
  const bool spatial = p.kind == Kind::Spatial || p.kind == Kind::ColumnSpatial;
  const bool column = p.kind == Kind::ColumnLocal || p.kind == Kind::ColumnSpatial;
  (spatial ? t.threads : t.locals) = prod(p.n);
  for (int64_t v = 0; v < prod(p.n); ++v)
    for (int64_t x : unravel(v, p.n, column))
      t.cells.push_back(x);
  return t;
}

// (f.g)(t, i) = f(t / T_g, i / N_g) * S_g + g(t mod T_g, i mod N_g), ISA section 3.1.
Table refProduct(const Table &f, const Table &g) {
  REQUIRE((f.rank < 0 || g.rank < 0 || f.rank == g.rank));
  Table h;
  h.rank = f.rank >= 0 ? f.rank : g.rank;
  const std::vector<int64_t> sf = f.rank >= 0 ? f.shape : ones(h.rank);
  const std::vector<int64_t> sg = g.rank >= 0 ? g.shape : ones(h.rank);
  for (int d = 0; d < h.width(); ++d)
    h.shape.push_back(sf[d] * sg[d]);
  h.threads = f.threads * g.threads;
  h.locals = f.locals * g.locals;
  for (int64_t t = 0; t < h.threads; ++t)
    for (int64_t i = 0; i < h.locals; ++i)
      for (int d = 0; d < h.width(); ++d) {
        const int64_t a = f.rank >= 0 ? f.at(t / g.threads, i / g.locals, d) : 0;
        const int64_t b = g.rank >= 0 ? g.at(t % g.threads, i % g.locals, d) : 0;
        h.cells.push_back(a * sg[d] + b);
      }
  return h;
}

Table refChain(const Chain &c) {
  Table t = refPrimitive(c[0]);
  for (size_t k = 1; k < c.size(); ++k)
    t = refProduct(t, refPrimitive(c[k]));
  return t;
}

Table tableOf(const RegisterLayout &l) {
  Table t;
  t.rank = l.rank();
  t.shape = l.shape();
  t.threads = l.numThreads();
  t.locals = l.numLocals();
  for (int64_t th = 0; th < t.threads; ++th)
    for (int64_t i = 0; i < t.locals; ++i)
      for (int64_t x : l.apply(th, i))
        t.cells.push_back(x);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Building real layouts, and a tiny parser for printed chains (the real one is the assembler's).

Expected<RegisterLayout> primitive(const Prim &p) {
  switch (p.kind) {
  case Kind::Local:
    return RegisterLayout::local(p.n);
  case Kind::ColumnLocal:
    return RegisterLayout::columnLocal(p.n);
  case Kind::Spatial:
    return RegisterLayout::spatial(p.n);
  case Kind::ColumnSpatial:
    return RegisterLayout::columnSpatial(p.n);
  case Kind::Replicate:
    return RegisterLayout::replicate(p.n[0]);
  }
  return RegisterLayout();
}

RegisterLayout build(const Chain &c) {
  Expected<RegisterLayout> l = primitive(c[0]);
  REQUIRE_OK(l);
  for (size_t k = 1; k < c.size(); ++k) {
    Expected<RegisterLayout> p = primitive(c[k]);
    REQUIRE_OK(p);
    l = l->product(*p);
    REQUIRE_OK(l);
  }
  return *l;
}

std::string chainText(const Chain &c) {
  static const char *names[] = {"local", "column_local", "spatial", "column_spatial", "replicate"};
  std::string out;
  for (const Prim &p : c) {
    if (!out.empty())
      out += ".";
    out += names[int(p.kind)];
    out += "(";
    for (size_t d = 0; d < p.n.size(); ++d) {
      if (d > 0)
        out += ", ";
      out += std::to_string(p.n[d]);
    }
    out += ")";
  }
  return out;
}

// chain := prim ('.' prim)* ; prim := NAME '(' [INT (',' INT)*] ')'
std::optional<Chain> parseChain(const std::string &text) {
  size_t pos = 0;
  Chain chain;
  while (true) {
    size_t start = pos;
    while (pos < text.size() && (std::islower(text[pos]) || text[pos] == '_'))
      ++pos;
    const std::string name = text.substr(start, pos - start);
    static const std::map<std::string, Kind> kinds = {{"local", Kind::Local},
                                                      {"column_local", Kind::ColumnLocal},
                                                      {"spatial", Kind::Spatial},
                                                      {"column_spatial", Kind::ColumnSpatial},
                                                      {"replicate", Kind::Replicate}};
    if (!kinds.count(name) || pos >= text.size() || text[pos++] != '(')
      return std::nullopt;
    Prim p{kinds.at(name), {}};
    while (pos < text.size() && text[pos] != ')') {
      if (!p.n.empty() && text.compare(pos, 2, ", ") != 0)
        return std::nullopt;
      if (!p.n.empty())
        pos += 2;
      start = pos;
      while (pos < text.size() && std::isdigit(text[pos]))
        ++pos;
      if (pos == start)
        return std::nullopt;
      p.n.push_back(std::stoll(text.substr(start, pos - start)));
    }
    if (pos >= text.size())
      return std::nullopt;
    ++pos; // ')'
    if (p.kind == Kind::Replicate && p.n.size() != 1)
      return std::nullopt;
    chain.push_back(p);
    if (pos == text.size())
      return chain;
    if (text[pos++] != '.')
      return std::nullopt;
  }
}

RegisterLayout parseLayout(const std::string &text) {
  std::optional<Chain> chain = parseChain(text);
  INFO(text);
  REQUIRE(chain.has_value());
  return build(*chain);
}

RegisterLayout make(Expected<RegisterLayout> l) {
  REQUIRE_OK(l);
  return *l;
}

/// The layout of rank `rank` that equals `l` as a function (an unranked l gets local(1..1).l).
RegisterLayout ranked(const RegisterLayout &l, int rank) {
  if (l.rank() >= 0 || rank < 0)
    return l;
  return make(make(RegisterLayout::local(ones(rank))).product(l));
}

// ---------------------------------------------------------------------------------------------
// Brute-force references for owners, division, permute and reduce.

std::vector<std::vector<std::pair<int64_t, int64_t>>> refOwners(const Table &t) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> owners(size_t(prod(t.shape)));
  for (int64_t th = 0; th < t.threads; ++th)
    for (int64_t i = 0; i < t.locals; ++i) {
      int64_t linear = 0;
      for (int d = 0; d < t.width(); ++d)
        linear = linear * t.shape[d] + t.at(th, i, d);
      owners[size_t(linear)].emplace_back(th, i);
    }
  return owners;
}

// f with f.g == h: since g(0, 0) = 0, f(t, i) = h(t * T_g, i * N_g) / S_g; then check.
std::optional<Table> refDivideRight(const Table &h, const Table &g) {
  if (g.rank >= 0 && g.rank != h.rank)
    return std::nullopt;
  const std::vector<int64_t> sg = g.rank >= 0 ? g.shape : ones(h.rank);
  Table f;
  f.rank = h.rank;
  for (int d = 0; d < h.width(); ++d) {
    if (h.shape[d] % sg[d] != 0)
      return std::nullopt;
    f.shape.push_back(h.shape[d] / sg[d]);
  }
  if (h.threads % g.threads != 0 || h.locals % g.locals != 0)
    return std::nullopt;
  f.threads = h.threads / g.threads;
  f.locals = h.locals / g.locals;
  for (int64_t t = 0; t < f.threads; ++t)
    for (int64_t i = 0; i < f.locals; ++i)
      for (int d = 0; d < h.width(); ++d) {
        const int64_t x = h.at(t * g.threads, i * g.locals, d);
        if (x % sg[d] != 0)
          return std::nullopt;
        f.cells.push_back(x / sg[d]);
      }
  if (!(refProduct(f, g) == h))
    return std::nullopt;
  return f;
}

// g with f.g == h: since f(0, 0) = 0, g(t, i) = h(t, i) for t < T_g, i < N_g; then check.
std::optional<Table> refDivideLeft(const Table &h, const Table &f) {
  if (f.rank >= 0 && f.rank != h.rank)
    return std::nullopt;
  const std::vector<int64_t> sf = f.rank >= 0 ? f.shape : ones(h.rank);
  Table g;
  g.rank = h.rank;
  for (int d = 0; d < h.width(); ++d) {
    if (h.shape[d] % sf[d] != 0)
      return std::nullopt;
    g.shape.push_back(h.shape[d] / sf[d]);
  }
  if (h.threads % f.threads != 0 || h.locals % f.locals != 0)
    return std::nullopt;
  g.threads = h.threads / f.threads;
  g.locals = h.locals / f.locals;
  for (int64_t t = 0; t < g.threads; ++t)
    for (int64_t i = 0; i < g.locals; ++i)
      for (int d = 0; d < h.width(); ++d) {
        if (h.at(t, i, d) >= g.shape[d])
          return std::nullopt;
        g.cells.push_back(h.at(t, i, d));
      }
  if (!(refProduct(f, g) == h))
    return std::nullopt;
  return g;
}

Table refPermute(const Table &l, const std::vector<int64_t> &dims) {
  Table p = l;
  for (size_t k = 0; k < dims.size(); ++k)
    p.shape[k] = l.shape[dims[k]];
  for (int64_t t = 0; t < l.threads; ++t)
    for (int64_t i = 0; i < l.locals; ++i)
      for (size_t k = 0; k < dims.size(); ++k)
        p.cells[(t * l.locals + i) * l.width() + k] = l.at(t, i, int(dims[k]));
  return p;
}

// ISA section 5: thread t of the result owns the operand's elements of t with dimension `dim`
// dropped; its local slots follow the operand's order of first appearance (the dropped local
// modes of `dim` only repeat values). Returns nullopt if the threads disagree on the count.
std::optional<Table> refReduce(const Table &l, int dim, bool keepDim) {
  Table r;
  r.rank = keepDim ? l.rank : l.rank - 1;
  r.shape = l.shape;
  if (keepDim)
    r.shape[dim] = 1;
  else
    r.shape.erase(r.shape.begin() + dim);
  r.threads = l.threads;
  std::vector<std::vector<std::vector<int64_t>>> perThread(size_t(l.threads));
  for (int64_t t = 0; t < l.threads; ++t) {
    for (int64_t i = 0; i < l.locals; ++i) {
      std::vector<int64_t> x = l.index(t, i);
      if (keepDim)
        x[dim] = 0;
      else
        x.erase(x.begin() + dim);
      auto &seen = perThread[t];
      if (std::find(seen.begin(), seen.end(), x) == seen.end())
        seen.push_back(x);
    }
    if (perThread[t].size() != perThread[0].size())
      return std::nullopt;
  }
  r.locals = int64_t(perThread[0].size());
  for (const auto &seen : perThread)
    for (const auto &x : seen)
      r.cells.insert(r.cells.end(), x.begin(), x.end());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Domains.

std::vector<std::vector<int64_t>> sizeVectors(int rank, int64_t maxSize) {
  std::vector<std::vector<int64_t>> out{{}};
  for (int d = 0; d < rank; ++d) {
    std::vector<std::vector<int64_t>> next;
    for (const auto &v : out)
      for (int64_t s = 1; s <= maxSize; ++s) {
        next.push_back(v);
        next.back().push_back(s);
      }
    out = next;
  }
  return out;
}

std::vector<Prim> primitives(int rank, int64_t maxSize) {
  std::vector<Prim> out;
  for (Kind k : {Kind::Local, Kind::ColumnLocal, Kind::Spatial, Kind::ColumnSpatial})
    for (const auto &n : sizeVectors(rank, maxSize))
      out.push_back(Prim{k, n});
  for (int64_t k = 1; k <= maxSize; ++k)
    out.push_back(Prim{Kind::Replicate, {k}});
  return out;
}

void forEachChain(const std::vector<Prim> &prims, size_t length,
                  const std::function<void(const Chain &)> &fn) {
  Chain c(length, prims[0]);
  std::function<void(size_t)> rec = [&](size_t k) {
    if (k == length) {
      fn(c);
      return;
    }
    for (const Prim &p : prims) {
      c[k] = p;
      rec(k + 1);
    }
  };
  rec(0);
}

/// Chains of length 1..3: rank 1 with sizes 1..4; rank 2 up to length 2 with sizes 1..4 and
/// length 3 with sizes 1..2.
std::vector<Chain> chainDomain() {
  std::vector<Chain> out;
  auto add = [&](const Chain &c) { out.push_back(c); };
  for (size_t len = 1; len <= 3; ++len)
    forEachChain(primitives(1, 4), len, add);
  for (size_t len = 1; len <= 2; ++len)
    forEachChain(primitives(2, 4), len, add);
  forEachChain(primitives(2, 2), 3, add);
  return out;
}

const std::vector<Chain> &domain() {
  static const std::vector<Chain> chains = chainDomain();
  return chains;
}

void checkTable(const RegisterLayout &l,
                const std::function<std::vector<int64_t>(int64_t, int64_t)> &ref) {
  for (int64_t t = 0; t < l.numThreads(); ++t)
    for (int64_t i = 0; i < l.numLocals(); ++i) {
      INFO("t=" << t << " i=" << i);
      CHECK(l.apply(t, i) == ref(t, i));
    }
}

} // namespace

TEST_CASE("layout: ISA section 3.1 reference values") {
  SUBCASE("local(2, 3)") {
    RegisterLayout l = parseLayout("local(2, 3)");
    CHECK(l.numThreads() == 1);
    CHECK(l.numLocals() == 6);
    checkTable(l, [](int64_t, int64_t i) { return std::vector<int64_t>{i / 3, i % 3}; });
  }
  SUBCASE("spatial(2, 3)") {
    RegisterLayout l = parseLayout("spatial(2, 3)");
    CHECK(l.numThreads() == 6);
    CHECK(l.numLocals() == 1);
    checkTable(l, [](int64_t t, int64_t) { return std::vector<int64_t>{t / 3, t % 3}; });
  }
  SUBCASE("mma C fragment") {
    RegisterLayout l = parseLayout("local(2, 1).spatial(8, 4).local(1, 2)");
    CHECK(l.shape() == std::vector<int64_t>{16, 8});
    CHECK(l.numThreads() == 32);
    CHECK(l.numLocals() == 4);
    checkTable(l, [](int64_t t, int64_t i) {
      return std::vector<int64_t>{t / 4 + 8 * (i / 2), 2 * (t % 4) + i % 2};
    });
    // The worked example of layout.h.
    CHECK(l.modes() == std::vector<LayoutMode>{{0, 2}, {0, 8}, {1, 4}, {1, 2}});
    CHECK(l.spatialModes() == std::vector<int32_t>{1, 2});
    CHECK(l.localModes() == std::vector<int32_t>{0, 3});
  }
  SUBCASE("mma A fragment") {
    RegisterLayout l = parseLayout("column_local(2, 2).spatial(8, 4).local(1, 2)");
    CHECK(l.shape() == std::vector<int64_t>{16, 16});
    CHECK(l.numThreads() == 32);
    CHECK(l.numLocals() == 8);
    checkTable(l, [](int64_t t, int64_t i) {
      return std::vector<int64_t>{t / 4 + 8 * ((i / 2) % 2), 2 * (t % 4) + i % 2 + 8 * (i / 4)};
    });
  }
  SUBCASE("mma B fragment") {
    RegisterLayout l = parseLayout("local(2, 1).column_spatial(4, 8).local(2, 1)");
    CHECK(l.shape() == std::vector<int64_t>{16, 8});
    CHECK(l.numThreads() == 32);
    CHECK(l.numLocals() == 4);
    checkTable(l, [](int64_t t, int64_t i) {
      return std::vector<int64_t>{8 * (i / 2) + 2 * (t % 4) + i % 2, t / 4};
    });
  }
}

TEST_CASE("layout: products of primitive chains match the Kronecker formula") {
  for (const Chain &c : domain()) {
    INFO(chainText(c));
    const RegisterLayout l = build(c);
    const Table ref = refChain(c);
    CHECK(tableOf(l) == ref);
    CHECK(l.numElements() == prod(ref.shape));
    CHECK(l.owners() == refOwners(ref));
    bool replicated = false;
    for (const auto &owners : refOwners(ref))
      replicated = replicated || owners.size() > 1;
    CHECK(l.isReplicated() == replicated);
    for (int64_t t = 0; t < l.numThreads(); ++t)
      for (int64_t i = 0; i < l.numLocals(); ++i) {
        int64_t linear = 0;
        for (int d = 0; d < ref.width(); ++d)
          linear = linear * ref.shape[d] + ref.at(t, i, d);
        CHECK(l.applyLinear(t, i) == linear);
      }
  }
}

TEST_CASE("layout: canonical form equality is function equality") {
  std::map<std::vector<int64_t>, RegisterLayout> byFunction;
  std::map<std::string, std::vector<int64_t>> byForm;
  for (const Chain &c : domain()) {
    INFO(chainText(c));
    const RegisterLayout l = build(c);
    const std::vector<int64_t> key = refChain(c).key();
    auto [f, newFunction] = byFunction.emplace(key, l);
    if (!newFunction) {
      INFO("same function as " << f->second.toString());
      CHECK(f->second == l);
      CHECK(f->second.hash() == l.hash());
    }
    auto [g, newForm] = byForm.emplace(l.canonicalString(), key);
    CHECK((newForm || g->second == key));
  }
  // Every distinct function has its own canonical form, and the forms are distinct as values.
  CHECK(byFunction.size() == byForm.size());
  CHECK(byFunction.size() > 1000);
}

TEST_CASE("layout: toString parses back to an equal layout") {
  for (const Chain &c : domain()) {
    const RegisterLayout l = build(c);
    const std::string text = l.toString();
    INFO(chainText(c) << " printed as " << text);
    const RegisterLayout back = parseLayout(text);
    CHECK(back == l);
    CHECK(tableOf(back) == refChain(c));
  }
  // The natural spellings.
  for (const char *text :
       {"local(2, 1).spatial(8, 4).local(1, 2)", "column_local(2, 2).spatial(8, 4).local(1, 2)",
        "local(2, 1).column_spatial(4, 8).local(2, 1)", "spatial(4, 32).local(1, 4)",
        "spatial(4).replicate(32)", "spatial(4, 1).replicate(32)", "local(3).spatial(32)",
        "replicate(4)", "replicate(2).spatial(16)", "spatial(2, 3, 4).local(2, 1, 2)"})
    CHECK(parseLayout(text).toString() == text);
  CHECK(parseLayout("spatial(2, 1).spatial(4, 4)").toString() == "spatial(8, 4)");
  CHECK(parseLayout("spatial(2, 4).spatial(4, 1)").toString() == "spatial(2, 4).spatial(4, 1)");
  CHECK(parseLayout("local(4).local(2)").toString() == "local(8)");
  CHECK(parseLayout("replicate(2).replicate(3)").toString() == "replicate(6)");
  CHECK(parseLayout("local(1, 1)").toString() == "local(1, 1)");
  CHECK(parseLayout("spatial(1, 1).replicate(8)").toString() == "local(1, 1).replicate(8)");
  CHECK(parseLayout("replicate(1)").toString() == "replicate(1)");
  CHECK(RegisterLayout().toString() == "local()");
  CHECK(parseLayout("local()") == RegisterLayout());
}

TEST_CASE("layout: rank-0 and unranked layouts") {
  const RegisterLayout r = make(RegisterLayout::replicate(4));
  CHECK(r.rank() == -1);
  CHECK(r.numThreads() == 4);
  CHECK(r.shape().empty());
  CHECK(r.numElements() == 1);
  CHECK(r.isReplicated());
  CHECK(r.owners() ==
        std::vector<std::vector<std::pair<int64_t, int64_t>>>{{{0, 0}, {1, 0}, {2, 0}, {3, 0}}});
  CHECK(make(r.product(r)).rank() == -1);
  CHECK(make(r.product(r)) == make(RegisterLayout::replicate(16)));
  // A rank-0 layout is the product's identity and keeps its rank with replication.
  const RegisterLayout zero;
  CHECK(zero.rank() == 0);
  CHECK(make(zero.product(zero)) == zero);
  const RegisterLayout zeroRep = make(zero.product(r));
  CHECK(zeroRep.rank() == 0);
  CHECK(zeroRep.numThreads() == 4);
  CHECK(!(zeroRep == r));
  CHECK(zeroRep.toString() == "local().replicate(4)");
  CHECK(parseLayout("local().replicate(4)") == zeroRep);
  CHECK(zeroRep.canonicalString() == "shape=[] modes=[r:4] spatial=[0] local=[]");
  CHECK(r.canonicalString() == "shape=* modes=[r:4] spatial=[0] local=[]");
}

TEST_CASE("layout: canonicalString writes the unified form") {
  CHECK(parseLayout("local(2, 1).spatial(8, 4).local(1, 2)").canonicalString() ==
        "shape=[16, 8] modes=[0:2, 0:8, 1:4, 1:2] spatial=[1, 2] local=[0, 3]");
  CHECK(parseLayout("spatial(4, 1).replicate(32)").canonicalString() ==
        "shape=[4, 1] modes=[0:4, r:32] spatial=[0, 1] local=[]");
  CHECK(parseLayout("replicate(2).spatial(4).replicate(8)").canonicalString() ==
        "shape=[4] modes=[0:4, r:2, r:8] spatial=[1, 0, 2] local=[]");
}

TEST_CASE("layout: division inverts the product") {
  for (const Chain &c : domain()) {
    if (c.size() < 2)
      continue;
    INFO(chainText(c));
    const RegisterLayout h = build(c);
    for (size_t k = 1; k < c.size(); ++k) {
      const RegisterLayout f = build(Chain(c.begin(), c.begin() + long(k)));
      const RegisterLayout g = build(Chain(c.begin() + long(k), c.end()));
      INFO("f = " << f.toString() << ", g = " << g.toString());
      const std::optional<RegisterLayout> q = h.divideRight(g);
      REQUIRE(q.has_value());
      CHECK(*q == ranked(f, h.rank()));
      const std::optional<RegisterLayout> p = h.divideLeft(f);
      REQUIRE(p.has_value());
      CHECK(*p == ranked(g, h.rank()));
    }
  }
}

TEST_CASE("layout: division agrees with a brute-force search for quotients") {
  auto check = [](const std::vector<Chain> &hs, const std::vector<Prim> &gs) {
    int64_t divisible = 0, total = 0;
    for (const Chain &hc : hs) {
      const RegisterLayout h = build(hc);
      const Table ht = refChain(hc);
      for (const Prim &gp : gs) {
        const RegisterLayout g = build({gp});
        const Table gt = refPrimitive(gp);
        INFO(h.toString() << " by " << g.toString());
        const std::optional<Table> right = refDivideRight(ht, gt);
        const std::optional<RegisterLayout> q = h.divideRight(g);
        REQUIRE(q.has_value() == right.has_value());
        if (q)
          CHECK(tableOf(*q) == *right);
        const std::optional<Table> left = refDivideLeft(ht, gt);
        const std::optional<RegisterLayout> p = h.divideLeft(g);
        REQUIRE(p.has_value() == left.has_value());
        if (p)
          CHECK(tableOf(*p) == *left);
        divisible += int64_t(right.has_value()) + int64_t(left.has_value());
        total += 2;
      }
    }
    // Both outcomes occur often, so neither answer alone passes.
    CHECK(divisible > total / 20);
    CHECK(divisible < total - total / 20);
  };
  std::vector<Chain> rank1, rank2;
  for (size_t len = 1; len <= 3; ++len)
    forEachChain(primitives(1, 4), len, [&](const Chain &c) { rank1.push_back(c); });
  check(rank1, primitives(1, 4));
  for (size_t len = 1; len <= 2; ++len)
    forEachChain(primitives(2, 2), len, [&](const Chain &c) { rank2.push_back(c); });
  std::vector<Prim> g2 = primitives(2, 2);
  check(rank2, g2);
}

TEST_CASE("layout: division examples") {
  const RegisterLayout c = parseLayout("local(2, 1).spatial(8, 4).local(1, 2)");
  const RegisterLayout atom = parseLayout("spatial(2, 4).local(1, 2)");
  const std::optional<RegisterLayout> outer = c.divideRight(atom);
  REQUIRE(outer.has_value());
  CHECK(outer->toString() == "local(2, 1).spatial(4, 1)");
  // A 64x32 accumulator of 4 warps, each 2x2 mma C tiles, is divisible by the C atom.
  const RegisterLayout acc =
      parseLayout("spatial(2, 2).local(2, 2).local(2, 1).spatial(8, 4).local(1, 2)");
  const std::optional<RegisterLayout> warps = acc.divideRight(c);
  REQUIRE(warps.has_value());
  CHECK(*warps == parseLayout("spatial(2, 2).local(2, 2)"));
  CHECK(acc.divideLeft(*warps) == c);
  CHECK_FALSE(acc.divideRight(parseLayout("local(2, 1).column_spatial(4, 8).local(2, 1)")));
  CHECK_FALSE(parseLayout("local(4)").divideRight(parseLayout("spatial(2)")));
  CHECK_FALSE(parseLayout("local(6)").divideRight(parseLayout("local(4)")));
  CHECK_FALSE(parseLayout("local(2, 2)").divideRight(parseLayout("local(4)")));
  CHECK_FALSE(parseLayout("spatial(2).local(2)").divideRight(parseLayout("spatial(2)")));
  CHECK(parseLayout("spatial(2).local(2)").divideLeft(parseLayout("spatial(2)")) ==
        parseLayout("local(2)"));
  CHECK_FALSE(parseLayout("replicate(4)").divideRight(parseLayout("local(1)")));
  CHECK(parseLayout("spatial(4).replicate(6)").divideRight(parseLayout("replicate(3)")) ==
        parseLayout("spatial(4).replicate(2)"));
  CHECK_FALSE(parseLayout("spatial(4).replicate(6)").divideRight(parseLayout("replicate(4)")));
  // Quotients take h's rank.
  const std::optional<RegisterLayout> unrankedQuotient =
      parseLayout("local(2).replicate(2)").divideLeft(parseLayout("local(2)"));
  REQUIRE(unrankedQuotient.has_value());
  CHECK(unrankedQuotient->rank() == 1);
  CHECK(unrankedQuotient->toString() == "local(1).replicate(2)");
  CHECK_FALSE(parseLayout("replicate(4)").divideLeft(parseLayout("local(1)")));
  CHECK(parseLayout("replicate(4)").divideLeft(parseLayout("replicate(2)")) ==
        parseLayout("replicate(2)"));
}

TEST_CASE("layout: permute matches a brute-force transpose") {
  std::vector<Chain> chains;
  forEachChain(primitives(2, 3), 2, [&](const Chain &c) { chains.push_back(c); });
  chains.push_back(*parseChain("spatial(2, 3, 4).local(2, 1, 2)"));
  chains.push_back(*parseChain("column_local(2, 2, 2).spatial(1, 2, 3).replicate(2)"));
  chains.push_back(*parseChain("local(2, 1, 3).column_spatial(2, 2, 1).local(1, 3, 2)"));
  for (const Chain &c : chains) {
    const RegisterLayout l = build(c);
    if (l.rank() < 0)
      continue;
    std::vector<int64_t> dims(static_cast<size_t>(l.rank()));
    std::iota(dims.begin(), dims.end(), 0);
    do {
      INFO(chainText(c) << " dims " << dims[0] << dims[1]);
      const RegisterLayout p = make(l.permute(dims));
      CHECK(tableOf(p) == refPermute(refChain(c), dims));
    } while (std::next_permutation(dims.begin(), dims.end()));
  }
  const RegisterLayout c = parseLayout("local(2, 1).spatial(8, 4).local(1, 2)");
  CHECK(make(c.permute({1, 0})).toString() == "local(1, 2).column_spatial(4, 8).local(2, 1)");
  CHECK(make(parseLayout("replicate(2)").permute({})) == parseLayout("replicate(2)"));
  CHECK_ERROR(c.permute({0}), ErrorCode::BadArgument);
  CHECK_ERROR(c.permute({0, 0}), ErrorCode::BadArgument);
  CHECK_ERROR(c.permute({0, 2}), ErrorCode::BadArgument);
}

TEST_CASE("layout: reduce matches a brute-force ownership reference") {
  std::vector<Chain> chains;
  for (size_t len = 1; len <= 3; ++len)
    forEachChain(primitives(2, 2), len, [&](const Chain &c) { chains.push_back(c); });
  forEachChain(primitives(1, 3), 2, [&](const Chain &c) { chains.push_back(c); });
  for (const Chain &c : chains) {
    const RegisterLayout l = build(c);
    if (l.rank() < 1)
      continue;
    for (int dim = 0; dim < l.rank(); ++dim)
      for (bool keepDim : {true, false}) {
        INFO(chainText(c) << " dim " << dim << " keepdim " << keepDim);
        const std::optional<Table> ref = refReduce(refChain(c), dim, keepDim);
        REQUIRE(ref.has_value());
        const RegisterLayout r = make(l.reduce(dim, keepDim));
        CHECK(tableOf(r) == *ref);
        CHECK(parseLayout(r.toString()) == r);
      }
  }
}

TEST_CASE("layout: the ISA section 5 Reduce example") {
  const RegisterLayout l = parseLayout("spatial(4, 32).local(1, 4)");
  const RegisterLayout kept = make(l.reduce(1, true));
  CHECK(kept == parseLayout("spatial(4, 1).replicate(32)"));
  CHECK(kept.toString() == "spatial(4, 1).replicate(32)");
  const RegisterLayout dropped = make(l.reduce(1, false));
  CHECK(dropped == parseLayout("spatial(4).replicate(32)"));
  CHECK(dropped.toString() == "spatial(4).replicate(32)");
  CHECK(dropped.numThreads() == 128);
  CHECK(dropped.numLocals() == 1);
  const RegisterLayout rank0 = make(dropped.reduce(0, false));
  CHECK(rank0.rank() == 0);
  CHECK(rank0.toString() == "local().replicate(128)");
  CHECK_ERROR(l.reduce(2, false), ErrorCode::ReduceDim);
  CHECK_ERROR(l.reduce(-1, true), ErrorCode::ReduceDim);
  CHECK_ERROR(parseLayout("replicate(2)").reduce(0, true), ErrorCode::ReduceDim);
}

TEST_CASE("layout: invalid primitives and products") {
  CHECK_ERROR(RegisterLayout::local({0}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::local({2, -1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::columnLocal({0, 2}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::spatial({-3}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::columnSpatial({4, 0}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::replicate(0), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::replicate(-2), ErrorCode::LayoutInvalid);
  CHECK_ERROR(parseLayout("local(2)").product(parseLayout("local(2, 2)")),
              ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout().product(parseLayout("spatial(2)")), ErrorCode::LayoutInvalid);
  // At most kMaxLayoutCells = 2^21 cells (threads x locals), the bytecode's limit.
  CHECK_ERROR(RegisterLayout::local({int64_t(1) << 40}), ErrorCode::LayoutInvalid);
  CHECK(make(RegisterLayout::local({int64_t(1) << 21})).numLocals() == int64_t(1) << 21);
  CHECK_ERROR(RegisterLayout::local({(int64_t(1) << 21) + 1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::spatial({1024}).value().product(make(RegisterLayout::local({4096}))),
              ErrorCode::LayoutInvalid); // 1024 x 4096 = 2^22 cells
  const RegisterLayout big = make(RegisterLayout::local({int64_t(1) << 11}));
  CHECK_ERROR(big.product(big), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::spatial({int64_t(1) << 32, int64_t(1) << 32}),
              ErrorCode::LayoutInvalid);
}

TEST_CASE("layout: tryCreate validates and canonicalises") {
  using M = LayoutMode;
  const RegisterLayout c = parseLayout("local(2, 1).spatial(8, 4).local(1, 2)");
  CHECK(make(RegisterLayout::tryCreate({16, 8}, {{0, 2}, {0, 8}, {1, 4}, {1, 2}}, {1, 2},
                                       {0, 3})) == c);
  // Split modes, size-1 modes, and modes of different dimensions interleaved in the vector.
  CHECK(make(RegisterLayout::tryCreate({16, 8}, {{1, 4}, {0, 2}, {0, 2}, {1, 1}, {0, 4}, {1, 2}},
                                       {1, 4, 0, 3}, {2, 5})) ==
        parseLayout("spatial(2, 1).local(2, 1).spatial(4, 4).local(1, 2)"));
  CHECK(make(RegisterLayout::tryCreate({16, 8}, {{0, 2}, {0, 2}, {0, 4}, {1, 4}, {1, 2}}, {1, 2, 3},
                                       {0, 4})) == c);
  // Replication entries anywhere in the vector; neighbours in the spatial list merge.
  CHECK(make(RegisterLayout::tryCreate({4}, {{-1, 2}, {0, 4}, {-1, 4}}, {1, 0, 2}, {})) ==
        parseLayout("spatial(4).replicate(8)"));
  CHECK(make(RegisterLayout::tryCreate({4}, {{-1, 2}, {0, 4}, {-1, 4}}, {0, 1, 2}, {})) ==
        parseLayout("replicate(2).spatial(4).replicate(4)"));

  CHECK_ERROR(RegisterLayout::tryCreate({0}, {}, {}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 0}, M{0, 2}}, {0, 1}, {}),
              ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{1, 2}}, {0}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{-2, 2}, M{0, 2}}, {0, 1}, {}),
              ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}}, {1}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}}, {-1}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}}, {}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}}, {0}, {0}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}}, {0, 0}, {}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({2}, {M{0, 2}, M{-1, 2}}, {0}, {1}),
              ErrorCode::LayoutInvalid);
  CHECK_ERROR(RegisterLayout::tryCreate({8}, {M{0, 2}, M{0, 2}}, {0}, {1}),
              ErrorCode::LayoutInvalid);
  CHECK(make(RegisterLayout::tryCreate({1}, {M{-1, 1}}, {0}, {})) == parseLayout("local(1)"));
  CHECK_ERROR(RegisterLayout::tryCreate({int64_t(1) << 62, 4}, {M{0, int64_t(1) << 62}, M{1, 4}},
                                        {0, 1}, {}),
              ErrorCode::LayoutInvalid);
  // dim 0 = [e, a], dim 1 = [b, c], spatial [a, b], local [c, e]: a < b < c < e < a.
  CHECK_ERROR(
      RegisterLayout::tryCreate({4, 4}, {M{0, 2}, M{0, 2}, M{1, 2}, M{1, 2}}, {1, 2}, {3, 0}),
      ErrorCode::LayoutInvalid);
}

namespace {

/// The function of a unified form, evaluated directly from the definition in layout.h: t and i
/// are row-major ravels of the list entries' coordinates, x_d of dimension d's modes in order.
Table formTable(const std::vector<int64_t> &shape, const std::vector<LayoutMode> &modes,
                const std::vector<int32_t> &spatial, const std::vector<int32_t> &local) {
  Table t;
  t.rank = int(shape.size());
  t.shape = shape;
  for (int32_t m : spatial)
    t.threads *= modes[m].size;
  for (int32_t m : local)
    t.locals *= modes[m].size;
  for (int64_t th = 0; th < t.threads; ++th)
    for (int64_t i = 0; i < t.locals; ++i) {
      std::vector<int64_t> coord(modes.size());
      int64_t rest = th;
      for (size_t p = spatial.size(); p-- > 0; rest /= modes[spatial[p]].size)
        coord[spatial[p]] = rest % modes[spatial[p]].size;
      rest = i;
      for (size_t p = local.size(); p-- > 0; rest /= modes[local[p]].size)
        coord[local[p]] = rest % modes[local[p]].size;
      std::vector<int64_t> x(shape.size(), 0);
      for (size_t m = 0; m < modes.size(); ++m)
        if (modes[m].dim >= 0)
          x[modes[m].dim] = x[modes[m].dim] * modes[m].size + coord[m];
      t.cells.insert(t.cells.end(), x.begin(), x.end());
    }
  return t;
}

/// Every function of a chain of rank-2 primitives of sizes 1..2 (and replicate(2)) with at most
/// 16 (thread, local) pairs, keyed by function table.
std::map<std::vector<int64_t>, RegisterLayout> smallChainFunctions() {
  std::vector<Prim> prims;
  for (const Prim &p : primitives(2, 2))
    if (prod(p.n) > 1)
      prims.push_back(p);
  std::map<std::vector<int64_t>, RegisterLayout> functions;
  Chain chain{Prim{Kind::Local, {1, 1}}}; // fixes the rank of replicate-only chains
  functions.emplace(refChain(chain).key(), build(chain));
  std::function<void()> grow = [&] {
    for (const Prim &p : prims) {
      chain.push_back(p);
      const Table t = refChain(chain);
      if (t.threads * t.locals <= 16)
        functions.emplace(t.key(), build(chain));
      if (t.threads * t.locals <= 8)
        grow();
      chain.pop_back();
    }
  };
  grow();
  return functions;
}

/// Calls fn for every unified form of rank 2 with up to 4 modes of size 2: dims from
/// {-1, 0, 1} (vector order = significance), each mode in one list (replication entries only in
/// the spatial list), every order of each list.
void forEachSmallForm(
    const std::function<void(const std::vector<int64_t> &, const std::vector<LayoutMode> &,
                             const std::vector<int32_t> &, const std::vector<int32_t> &)> &fn) {
  for (int k = 0; k <= 4; ++k) {
    int64_t dimChoices = 1;
    for (int m = 0; m < k; ++m)
      dimChoices *= 3;
    for (int64_t dc = 0; dc < dimChoices; ++dc) {
      std::vector<LayoutMode> modes;
      std::vector<int64_t> shape{1, 1};
      for (int64_t v = dc, m = 0; m < k; ++m, v /= 3) {
        modes.push_back(LayoutMode{int32_t(v % 3) - 1, 2});
        if (modes.back().dim >= 0)
          shape[modes.back().dim] *= 2;
      }
      for (int mask = 0; mask < (1 << k); ++mask) {
        std::vector<int32_t> spatial, local;
        for (int m = 0; m < k; ++m)
          ((mask >> m) & 1 ? spatial : local).push_back(m);
        if (std::any_of(local.begin(), local.end(), [&](int32_t m) { return modes[m].dim < 0; }))
          continue;
        do {
          do
            fn(shape, modes, spatial, local);
          while (std::next_permutation(local.begin(), local.end()));
        } while (std::next_permutation(spatial.begin(), spatial.end()));
      }
    }
  }
}

} // namespace

TEST_CASE("layout: tryCreate accepts exactly the forms that chains express") {
  const std::map<std::vector<int64_t>, RegisterLayout> chainFunctions = smallChainFunctions();
  int64_t accepted = 0, rejected = 0;
  forEachSmallForm([&](const std::vector<int64_t> &shape, const std::vector<LayoutMode> &modes,
                       const std::vector<int32_t> &spatial, const std::vector<int32_t> &local) {
    const Table t = formTable(shape, modes, spatial, local);
    Expected<RegisterLayout> l = RegisterLayout::tryCreate(shape, modes, spatial, local);
    const auto chain = chainFunctions.find(t.key());
    REQUIRE(l.ok() == (chain != chainFunctions.end()));
    if (l) {
      CHECK(tableOf(*l) == t);
      CHECK(*l == chain->second);
      ++accepted;
    } else {
      CHECK(l.status().code() == ErrorCode::LayoutInvalid);
      ++rejected;
    }
  });
  CHECK(accepted > 1000);
  CHECK(rejected > 10);
}

TEST_CASE("layout: tryCreate round-trips canonical forms") {
  for (const Chain &c : domain()) {
    const RegisterLayout l = build(c);
    if (l.rank() < 0)
      continue;
    INFO(chainText(c));
    CHECK(make(RegisterLayout::tryCreate(l.shape(), l.modes(), l.spatialModes(), l.localModes())) ==
          l);
  }
}
