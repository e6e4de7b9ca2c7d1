// Compiled (Yosys CXXRTL) driver for design.GradientCompressor.
//
// Built by simulation/cxxrtl.py, which includes this file after the generated design
// (`#include CXXRTL_DESIGN`) and defines the configuration macros:
//   GC_ADDR_WIDTH, GC_GRAD_WIDTH   port widths (payload field offsets follow the layouts:
//                                  grad_in payload = addr | grad << addr_width,
//                                  dram_out payload = addr | value << addr_width)
//
// It follows simulation/driver.py's `simulate` exactly, cycle for cycle:
// every cycle ("tick") the inputs are set, the design is settled (clock low), outputs are
// sampled, then the clock rises. See driver.py for the protocol.
//
// Usage: sim OPS OUT DRAM_MODE SEED PROBABILITY MAX_STALL IDLE_HOLD FLUSH_TIMEOUT MAX_CYCLES [PATTERN]
//   OPS   binary file of little-endian int64 records (kind, addr, grad, threshold, gap);
//         kind 0 = gradient, 1 = flush. `gap` is the idle cycles before a gradient.
//   OUT   binary results file (see write_results), written on success.
//   DRAM_MODE 0 always, 1 every_other, 2 random(seed, probability, max_stall), 3 periodic PATTERN
//   MAX_STALL, MAX_CYCLES: -1 for none.
// On a protocol failure (DRAM stream rule, flush timeout, max cycles) the message goes to
// stderr prefixed "ASSERTION: " and the exit status is 3.

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <vector>

#include CXXRTL_DESIGN

#ifndef GC_ADDR_WIDTH
#error "GC_ADDR_WIDTH must be defined"
#endif
#ifndef GC_GRAD_WIDTH
#error "GC_GRAD_WIDTH must be defined"
#endif

static_assert(GC_ADDR_WIDTH <= 64, "addr_width above 64 is not supported by the compiled driver");
static_assert(GC_GRAD_WIDTH + 2 <= 64, "grad_width above 62 is not supported by the compiled driver");

static const size_t ADDR_W  = GC_ADDR_WIDTH;
static const size_t GRAD_W  = GC_GRAD_WIDTH;
static const size_t VALUE_W = GC_GRAD_WIDTH + 2;

static inline uint64_t mask_of(size_t width) {
	return width >= 64 ? ~uint64_t(0) : ((uint64_t(1) << width) - 1);
}

static inline int64_t sext(uint64_t v, size_t width) {
	if (width >= 64)
		return (int64_t)v;
	uint64_t sign = uint64_t(1) << (width - 1);
	v &= mask_of(width);
	return (int64_t)((v ^ sign) - sign);
}

// Bit-field access on a CXXRTL value (32-bit chunks); offset + width <= Bits, width <= 64.
template<size_t Bits>
static uint64_t get_field(const cxxrtl::value<Bits> &v, size_t offset, size_t width) {
	typedef cxxrtl::value<Bits> V;
	unsigned __int128 acc = 0;
	size_t first = offset / 32, shift = offset % 32;
	for (size_t k = 0; k < 3 && first + k < V::chunks; k++)
		acc |= (unsigned __int128)v.data[first + k] << (32 * k);
	return (uint64_t)(acc >> shift) & mask_of(width);
}

template<size_t Bits>
static void set_field(cxxrtl::value<Bits> &v, size_t offset, size_t width, uint64_t field) {
	typedef cxxrtl::value<Bits> V;
	size_t first = offset / 32, shift = offset % 32;
	unsigned __int128 m = (unsigned __int128)mask_of(width) << shift;
	unsigned __int128 f = (unsigned __int128)(field & mask_of(width)) << shift;
	for (size_t k = 0; k < 3 && first + k < V::chunks; k++) {
		uint32_t cm = (uint32_t)(m >> (32 * k));
		uint32_t cf = (uint32_t)(f >> (32 * k));
		v.data[first + k] = (v.data[first + k] & ~cm) | cf;
	}
}

// The DRAM ready generator shared with simulation/driver.py (`random_ready`): SplitMix64,
// and `next_double` = top 53 bits / 2**53, compared with `probability` as Python does.
struct SplitMix64 {
	uint64_t state;
	uint64_t next() {
		state += 0x9E3779B97F4A7C15ull;
		uint64_t z = state;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		return z ^ (z >> 31);
	}
	double next_double() {
		return (double)(next() >> 11) * (1.0 / 9007199254740992.0);
	}
};

struct DramReady {
	int mode;
	SplitMix64 rng;
	double probability;
	int64_t max_stall;
	int64_t stalled = 0;
	std::string pattern;

	bool operator()(uint64_t cycle) {
		switch (mode) {
		case 0:
			return true;
		case 1:
			return cycle % 2 == 0;
		case 2:
			if ((max_stall >= 0 && stalled >= max_stall) || rng.next_double() < probability) {
				stalled = 0;
				return true;
			}
			stalled++;
			return false;
		default:
			return pattern[cycle % pattern.size()] == '1';
		}
	}
};

struct Failure {
	std::string message;
};

struct Results {
	std::vector<int64_t> accepted;       // addr, grad, threshold
	std::vector<int64_t> accept_cycles;
	std::vector<int64_t> writes;         // addr, value
	std::vector<int64_t> write_cycles;
	std::vector<uint8_t> causes;         // index into model.CAUSES
	std::vector<int64_t> flush_cycles;
	int64_t input_stall_cycles = 0;
	int64_t dram_stall_cycles = 0;
	int64_t hits = 0;
	int64_t misses = 0;
	int64_t cycles = 0;
};

struct Driver {
	cxxrtl_design::p_top top;
	DramReady dram_ready;
	Results r;
	int64_t max_cycles = -1;
	uint64_t cycle = 0;
	bool last_dram_pending = false;
	uint64_t last_dram_addr = 0;
	int64_t last_dram_value = 0;

	// Settle the design (as module::step, calling the non-virtual commit).
	void settle() {
		bool converged;
		do {
			converged = top.eval();
		} while (top.commit() && !converged);
	}

	[[noreturn]] void fail(const std::string &message) {
		throw Failure { message };
	}

	void reset() {
		// The Amaranth simulator starts from every signal's init value; CXXRTL's constructor
		// does too, and one cycle with the sync domain's reset held makes sure of it.
		top.p_clk.set<bool>(false);
		top.p_rst.set<bool>(true);
		settle();
		top.p_clk.set<bool>(true);
		settle();
		top.p_clk.set<bool>(false);
		top.p_rst.set<bool>(false);
		settle();
	}

	// One cycle; returns whether a gradient was taken. Mirrors driver.py's `tick`.
	bool tick(bool offering) {
		top.p_dram__out____ready.set<bool>(dram_ready(cycle));
		settle();
		bool in_fire = offering && top.p_grad__in____ready.get<bool>();
		if (offering && !in_fire && !top.p_flush.get<bool>())
			r.input_stall_cycles++;
		if (in_fire) {
			r.accepted.push_back((int64_t)get_field(top.p_grad__in____payload, 0, ADDR_W));
			r.accepted.push_back(sext(get_field(top.p_grad__in____payload, ADDR_W, GRAD_W), GRAD_W));
			r.accepted.push_back((int64_t)get_field(top.p_threshold, 0, GRAD_W));
			r.accept_cycles.push_back((int64_t)cycle);
		}
		bool dram_valid = top.p_dram__out____valid.get<bool>();
		if (last_dram_pending || dram_valid) {
			uint64_t addr = get_field(top.p_dram__out____payload, 0, ADDR_W);
			int64_t value = sext(get_field(top.p_dram__out____payload, ADDR_W, VALUE_W), VALUE_W);
			if (last_dram_pending) {
				char buf[256];
				if (!dram_valid) {
					snprintf(buf, sizeof buf, "cycle %" PRIu64 ": dram_out.valid fell before it was taken", cycle);
					fail(buf);
				}
				if (addr != last_dram_addr || value != last_dram_value) {
					snprintf(buf, sizeof buf,
					         "cycle %" PRIu64 ": dram_out payload changed from (%" PRIu64 ", %" PRId64
					         ") to (%" PRIu64 ", %" PRId64 ")",
					         cycle, last_dram_addr, last_dram_value, addr, value);
					fail(buf);
				}
			}
			last_dram_pending = false;
			if (dram_valid) {
				if (top.p_dram__out____ready.get<bool>()) {
					r.writes.push_back((int64_t)addr);
					r.writes.push_back(value);
					r.write_cycles.push_back((int64_t)cycle);
				} else {
					r.dram_stall_cycles++;
					last_dram_pending = true;
					last_dram_addr = addr;
					last_dram_value = value;
				}
			}
		}
		// Order of model.CAUSES.
		if (top.p_direct__write.get<bool>())      r.causes.push_back(0);
		if (top.p_accum__write.get<bool>())       r.causes.push_back(1);
		if (top.p_max__updates__write.get<bool>()) r.causes.push_back(2);
		if (top.p_evict__write.get<bool>())       r.causes.push_back(3);
		if (top.p_flush__write.get<bool>())       r.causes.push_back(4);
		r.hits += top.p_l1__hit.get<bool>();
		r.misses += top.p_l1__miss.get<bool>();
		// Clock edge. CXXRTL's eval computes combinational outputs before the flip-flops
		// update, so outputs are stale after this step until the next settle(): outputs read
		// between ticks must call settle() first (with the clock low, so no edge).
		top.p_clk.set<bool>(true);
		settle();
		top.p_clk.set<bool>(false);
		cycle++;
		if (max_cycles >= 0 && (int64_t)cycle > max_cycles) {
			char buf[128];
			snprintf(buf, sizeof buf, "the run took more than %" PRId64 " cycles", max_cycles);
			fail(buf);
		}
		return in_fire;
	}

	void run(const int64_t *ops, size_t n_ops, int64_t idle_hold, int64_t flush_timeout) {
		for (size_t index = 0; index < n_ops; index++) {
			const int64_t *op = ops + 5 * index;
			if (op[0] == 0) {
				for (int64_t i = 0; i < op[4]; i++)
					tick(false);
				top.p_threshold.set<uint64_t>((uint64_t)op[3] & mask_of(GRAD_W));
				set_field(top.p_grad__in____payload, 0, ADDR_W, (uint64_t)op[1]);
				set_field(top.p_grad__in____payload, ADDR_W, GRAD_W, (uint64_t)op[2]);
				top.p_grad__in____valid.set<bool>(true);
				while (!tick(true)) {}
				top.p_grad__in____valid.set<bool>(false);
			} else if (op[0] == 1) {
				top.p_flush.set<bool>(true);
				uint64_t start = cycle;
				while (settle(), !top.p_idle.get<bool>()) {
					if ((int64_t)(cycle - start) > flush_timeout) {
						char buf[160];
						snprintf(buf, sizeof buf,
						         "flush raised at cycle %" PRIu64 " did not reach idle within %" PRId64
						         " cycles", start, flush_timeout);
						fail(buf);
					}
					tick(false);
				}
				r.flush_cycles.push_back((int64_t)(cycle - start));
				for (int64_t i = 0; i < idle_hold; i++) {
					tick(false);
					settle();
					if (!top.p_idle.get<bool>()) {
						char buf[128];
						snprintf(buf, sizeof buf, "cycle %" PRIu64 ": idle fell while flush was high", cycle);
						fail(buf);
					}
				}
				top.p_flush.set<bool>(false);
			} else {
				char buf[64];
				snprintf(buf, sizeof buf, "unknown operation kind %" PRId64, op[0]);
				fail(buf);
			}
		}
		r.cycles = (int64_t)cycle;
	}
};

template<class T>
static void put(FILE *f, const std::vector<T> &v) {
	if (!v.empty() && fwrite(v.data(), sizeof(T), v.size(), f) != v.size()) {
		perror("write");
		exit(2);
	}
}

// Results file: 11 int64 (n_accepted, n_writes, n_causes, n_flushes, input_stall_cycles,
// dram_stall_cycles, hits, misses, cycles, run_ns, status 0), then accepted (3 * n int64),
// accept_cycles (n int64), writes (2 * m int64), write_cycles (m int64), flush_cycles
// (f int64), causes (k uint8).
static void write_results(const char *path, const Results &r, int64_t run_ns) {
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(2);
	}
	int64_t header[11] = {
		(int64_t)r.accept_cycles.size(), (int64_t)r.write_cycles.size(), (int64_t)r.causes.size(),
		(int64_t)r.flush_cycles.size(), r.input_stall_cycles, r.dram_stall_cycles, r.hits, r.misses,
		r.cycles, run_ns, 0,
	};
	if (fwrite(header, sizeof header, 1, f) != 1) {
		perror("write");
		exit(2);
	}
	put(f, r.accepted);
	put(f, r.accept_cycles);
	put(f, r.writes);
	put(f, r.write_cycles);
	put(f, r.flush_cycles);
	put(f, r.causes);
	if (fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

int main(int argc, char **argv) {
	if (argc != 10 && argc != 11) {
		fprintf(stderr, "usage: %s OPS OUT DRAM_MODE SEED PROBABILITY MAX_STALL IDLE_HOLD "
		                "FLUSH_TIMEOUT MAX_CYCLES [PATTERN]\n", argv[0]);
		return 1;
	}
	std::vector<int64_t> ops;
	{
		FILE *f = fopen(argv[1], "rb");
		if (!f) {
			perror(argv[1]);
			return 2;
		}
		int64_t buf[5 * 4096];
		size_t n;
		while ((n = fread(buf, sizeof(int64_t), 5 * 4096, f)) > 0)
			ops.insert(ops.end(), buf, buf + n);
		fclose(f);
		if (ops.size() % 5 != 0) {
			fprintf(stderr, "%s: truncated operations file\n", argv[1]);
			return 2;
		}
	}

	Driver *d = new Driver;   // the design can be large: keep it off the stack
	d->dram_ready.mode = atoi(argv[3]);
	d->dram_ready.rng.state = strtoull(argv[4], nullptr, 10);
	d->dram_ready.probability = strtod(argv[5], nullptr);
	d->dram_ready.max_stall = strtoll(argv[6], nullptr, 10);
	int64_t idle_hold = strtoll(argv[7], nullptr, 10);
	int64_t flush_timeout = strtoll(argv[8], nullptr, 10);
	d->max_cycles = strtoll(argv[9], nullptr, 10);
	if (d->dram_ready.mode == 3) {
		if (argc != 11 || argv[10][0] == 0) {
			fprintf(stderr, "DRAM_MODE 3 needs a PATTERN\n");
			return 1;
		}
		d->dram_ready.pattern = argv[10];
	}
	size_t n_ops = ops.size() / 5;
	size_t n_grads = 0;
	for (size_t i = 0; i < n_ops; i++)
		n_grads += ops[5 * i] == 0;
	d->r.accepted.reserve(3 * n_grads);
	d->r.accept_cycles.reserve(n_grads);
	d->r.writes.reserve(2 * n_grads);
	d->r.write_cycles.reserve(n_grads);
	d->r.causes.reserve(n_grads);

	auto t0 = std::chrono::steady_clock::now();
	try {
		d->reset();
		d->run(ops.data(), n_ops, idle_hold, flush_timeout);
	} catch (const Failure &failure) {
		fprintf(stderr, "ASSERTION: %s\n", failure.message.c_str());
		return 3;
	}
	auto t1 = std::chrono::steady_clock::now();
	int64_t run_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
	write_results(argv[2], d->r, run_ns);
	return 0;
}
