//===- Golden.cpp - Hugging Face decode-step goldens ----------------------===//

#include "fusion/runtime/Golden.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace fusion::runtime {

namespace {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

/// Reads the tensors of one golden file with dtype and shape checks.
class GoldenReader {
public:
  explicit GoldenReader(const std::string &path)
      : file(SafetensorsFile::open(path)) {}

  const TensorInfo &info(const std::string &name) const {
    return file.info(name);
  }
  bool has(const std::string &name) const { return file.contains(name); }

  void expect(const std::string &name, std::string_view dtype,
              const std::vector<int64_t> &shape) const {
    const TensorInfo &t = file.info(name);
    if (t.dtype != dtype || t.shape != shape)
      throwFormat(file.path(), ": ", name, " is ", t.describe(), ", expected ",
                  dtype, shapeString(shape));
  }

  std::vector<uint16_t> read16(const std::string &name, DType dtype,
                               const std::vector<int64_t> &shape) const {
    expect(name, safetensorsDTypeName(dtype), shape);
    std::vector<uint16_t> out(static_cast<size_t>(info(name).numElements()));
    file.readInto(name, out.data(), out.size() * 2);
    return out;
  }

  std::vector<int32_t> readI32(const std::string &name,
                               const std::vector<int64_t> &shape) const {
    expect(name, "I32", shape);
    std::vector<int32_t> out(static_cast<size_t>(info(name).numElements()));
    file.readInto(name, out.data(), out.size() * 4);
    return out;
  }

  std::vector<double> readF32(const std::string &name,
                              const std::vector<int64_t> &shape) const {
    expect(name, "F32", shape);
    std::vector<float> f(static_cast<size_t>(info(name).numElements()));
    file.readInto(name, f.data(), f.size() * 4);
    return std::vector<double>(f.begin(), f.end());
  }

  SafetensorsFile file;
};

} // namespace

GoldenDecodeStep GoldenDecodeStep::load(const std::string &path) {
  GoldenReader r(path);
  GoldenDecodeStep g;
  g.path = path;
  const TensorInfo &hs = r.info("hidden_states");
  if (hs.shape.size() != 2 || (hs.dtype != "F16" && hs.dtype != "BF16"))
    throwFormat(path, ": hidden_states is ", hs.describe(),
                ", expected F16 or BF16 [batch, hidden]");
  g.dtype = hs.dtype == "F16" ? DType::F16 : DType::BF16;
  g.batch = hs.shape[0];
  g.hidden = hs.shape[1];
  const TensorInfo &q = r.info("q_rot"), &k = r.info("k_rot");
  if (q.shape.size() != 3 || k.shape.size() != 3 || q.shape[2] != k.shape[2])
    throwFormat(path, ": q_rot ", q.describe(), " and k_rot ", k.describe(),
                " are not [batch, Hq, D] and [batch, Hkv, D]");
  g.dims = {q.shape[1], k.shape[1], q.shape[2]};
  const int64_t B = g.batch, H = g.hidden, Hq = g.dims.numQHeads,
                Hkv = g.dims.numKVHeads, D = g.dims.headDim;
  if (B < 1 || Hkv < 1 || Hq % Hkv != 0)
    throwFormat(path, ": batch ", B, ", ", Hq, " query heads and ", Hkv,
                " KV heads do not make a GQA layer");

  g.hiddenStates = r.read16("hidden_states", g.dtype, {B, H});
  g.positions = r.readI32("positions", {B});
  g.historyLens = r.readI32("history_lens", {B});
  g.seqLens = r.readI32("seq_lens", {B});
  for (int64_t b = 0; b < B; ++b) {
    if (g.positions[b] < 0 || g.historyLens[b] < 0 ||
        g.seqLens[b] != int64_t(g.historyLens[b]) + 1)
      throwFormat(path, ": sequence ", b, ": position ", g.positions[b],
                  ", history_lens ", g.historyLens[b], ", seq_lens ",
                  g.seqLens[b], " (expected seq_lens = history_lens + 1)");
    std::string s = std::to_string(b);
    g.kHistory.push_back(
        r.read16("k_history_" + s, g.dtype, {g.historyLens[b], Hkv, D}));
    g.vHistory.push_back(
        r.read16("v_history_" + s, g.dtype, {g.historyLens[b], Hkv, D}));
  }
  g.expected["normed"] = r.read16("normed", g.dtype, {B, H});
  for (const char *name : {"q", "q_rot", "attn_output"})
    g.expected[name] = r.read16(name, g.dtype, {B, Hq, D});
  for (const char *name : {"k", "v", "k_rot"})
    g.expected[name] = r.read16(name, g.dtype, {B, Hkv, D});
  g.attnOutputF64 = r.readF32("attn_output_f64", {B, Hq, D});
  if (r.has("inv_freq"))
    g.invFreq = r.readF32("inv_freq", {r.info("inv_freq").numElements()});
  return g;
}

const std::vector<uint16_t> &
GoldenDecodeStep::tensor(const std::string &name) const {
  auto it = expected.find(name);
  if (it == expected.end())
    throwFormat(path, ": no golden tensor \"", name, "\"");
  return it->second;
}

int64_t
GoldenCacheLayout::newTokenOffset(int64_t b,
                                  const ref::AttentionDims &dims) const {
  const int64_t pos = positions[b];
  const int32_t page = blockTable[b * maxPages + pos / pageSize];
  return kvCacheOffset(page, pos % pageSize, 0, pageSize, dims.numKVHeads,
                       dims.headDim);
}

GoldenCacheLayout layoutGoldenCache(const GoldenDecodeStep &g, int64_t pageSize,
                                    int64_t numPages) {
  if (pageSize < 1)
    throwInvalidArgument("layoutGoldenCache: page size ", pageSize,
                         " must be >= 1");
  const int64_t B = g.batch, P = pageSize;
  const int64_t rowElems = g.dims.numKVHeads * g.dims.headDim;

  // Per sequence: the window slot of the new token (history_lens, or the
  // slot of its RoPE position within the first page).
  std::vector<int64_t> newSlot(static_cast<size_t>(B));
  int64_t needed = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = g.positions[b], len = g.historyLens[b];
    if (pos < len)
      throwUnsupported(g.path, ": sequence ", b, ": RoPE position ", pos,
                       " lies inside its history of ", len,
                       " tokens; the new token would overwrite one");
    if (pos != len && pos % P > len)
      throwUnsupported(
          g.path, ": sequence ", b, ": RoPE position ", pos, " is slot ",
          pos % P, " of its page of ", P, " tokens, outside the window of ",
          len + 1,
          " tokens attention reads; a compiled function appends at its RoPE "
          "position, so this sequence needs a page size P with ",
          pos, " % P <= ", len, " (e.g. 16 or 32 for 100000)");
    newSlot[b] = pos == len ? len : pos % P;
    needed += KVCacheManager::pagesForTokens(len + 1, P);
  }
  if (numPages == 0)
    numPages = needed;

  // Pages from the KV manager, a page at a time round-robin.
  KVCacheManager kv(numPages, P);
  for (int64_t b = 0; b < B; ++b)
    kv.addSequence(b);
  for (int64_t done = 0;; done += P) {
    bool any = false;
    for (int64_t b = 0; b < B; ++b)
      if (int64_t n = std::min<int64_t>(P, g.seqLens[b] - done); n > 0) {
        kv.appendTokens(b, n);
        any = true;
      }
    if (!any)
      break;
  }

  GoldenCacheLayout l;
  l.pageSize = P;
  l.numPages = numPages;
  l.maxPages = 1;
  for (int64_t b = 0; b < B; ++b)
    l.maxPages =
        std::max({l.maxPages, KVCacheManager::pagesForTokens(g.seqLens[b], P),
                  int64_t(g.positions[b]) / P + 1});
  l.blockTable.assign(static_cast<size_t>(B * l.maxPages), 0);
  l.positions = g.positions;
  l.seqLens = g.seqLens;
  const uint16_t nan = g.dtype == DType::F16 ? 0x7E00 : 0x7FC0;
  l.keyCache.assign(static_cast<size_t>(numPages * P * rowElems), nan);
  l.valueCache = l.keyCache;

  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = g.positions[b], len = g.historyLens[b];
    int32_t *table = l.blockTable.data() + b * l.maxPages;
    const std::vector<int32_t> &pages = kv.pages(b);
    std::copy(pages.begin(), pages.end(), table);
    // History token i goes to window slot i, or i + 1 past the new token.
    for (int64_t i = 0; i < len; ++i) {
      int64_t t = i >= newSlot[b] ? i + 1 : i;
      int64_t off = kvCacheOffset(table[t / P], t % P, 0, P, g.dims.numKVHeads,
                                  g.dims.headDim);
      std::memcpy(&l.keyCache[off], &g.kHistory[b][i * rowElems], rowElems * 2);
      std::memcpy(&l.valueCache[off], &g.vHistory[b][i * rowElems],
                  rowElems * 2);
    }
    std::ostringstream note;
    note << "sequence " << b << ": RoPE position " << pos << ", " << len
         << " history token" << (len == 1 ? "" : "s") << ": ";
    if (pos == len && len == 0) {
      note << "new token at slot 0";
    } else if (pos == len) {
      note << "history at slots 0.." << len - 1 << ", new token at " << pos;
    } else {
      table[pos / P] = table[newSlot[b] / P];
      note << "its logical page " << pos / P << " is mapped onto the page of "
           << "window slot " << newSlot[b] << ", where the new token lands ("
           << pos << " % " << P << "); the history fills the other slots of 0.."
           << len << ", so attention over " << len + 1
           << " tokens reads the golden's tokens in another order";
    }
    l.notes.push_back(note.str());
  }
  return l;
}

} // namespace fusion::runtime
