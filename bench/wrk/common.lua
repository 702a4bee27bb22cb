-- common.lua: shared by the wrk scripts of bench/serve_load.sh. Reads a file
-- of lines (query fingerprints or JSON bodies) once per wrk thread, and
-- prints one machine-readable summary line at the end of a run:
--   WRK requests=N seconds=S rps=R p50_us=.. p99_us=.. p999_us=.. max_us=..
--       non2xx=N connect_errors=N read_errors=N write_errors=N timeouts=N
-- wrk loads this file with dofile() from each script (wrk's working
-- directory is the script's: serve_load.sh runs wrk from bench/wrk).
local common = {}

function common.read_lines(path)
   local lines = {}
   local f = assert(io.open(path, "r"), "cannot open " .. tostring(path))
   for line in f:lines() do
      if #line > 0 then
         lines[#lines + 1] = line
      end
   end
   f:close()
   assert(#lines > 0, path .. " is empty")
   return lines
end

-- Thread ids for unique document ids: setup() runs in the main state, once
-- per thread, before init().
local next_thread = 0
function common.setup(thread)
   thread:set("thread_id", next_thread)
   next_thread = next_thread + 1
end

-- The request headers of a JSON POST, with the bearer token when given.
function common.json_headers(token)
   local headers = {["Content-Type"] = "application/json"}
   if token then
      headers["Authorization"] = "Bearer " .. token
   end
   return headers
end

-- A random fingerprint, 16 hex digits.
function common.random_hex16()
   return string.format("%04x%04x%04x%04x", math.random(0, 65535), math.random(0, 65535),
                        math.random(0, 65535), math.random(0, 65535))
end

function common.done(summary, latency, requests)
   local e = summary.errors
   local seconds = summary.duration / 1e6
   io.write(string.format(
      "WRK requests=%d seconds=%.3f rps=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d " ..
      "non2xx=%d connect_errors=%d read_errors=%d write_errors=%d timeouts=%d\n",
      summary.requests, seconds, summary.requests / seconds,
      latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
      e.status, e.connect, e.read, e.write, e.timeout))
end

return common
