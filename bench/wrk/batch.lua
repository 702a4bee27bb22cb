-- batch.lua: POST /v1/documents with a batch of DOCS documents in mode
-- insert-if-new, new ids and random fingerprints (so nearly every one is
-- inserted: a log record each, all durable before the answer).
-- Usage: wrk ... -s batch.lua URL -- RUN_TAG [DOCS] [K] [TOKEN]
-- RUN_TAG makes ids unique across runs against one store.
local common = dofile("common.lua")
local batches = 0
local tag, docs, k, headers

setup = common.setup
done = common.done

function init(args)
   tag = args[1] or tostring(os.time())
   docs = tonumber(args[2] or "1000")
   k = args[3] or "3"
   headers = common.json_headers(args[4])
   local t = tonumber(thread_id) or 0
   math.randomseed(os.time() + 1000003 * t)
   tag = tag .. "-" .. t
end

function request()
   batches = batches + 1
   local items = {}
   for j = 1, docs do
      items[j] = string.format('{"id":"wrkb-%s-%d-%d","fp":"%s"}', tag, batches, j,
                               common.random_hex16())
   end
   local body = string.format('{"documents":[%s],"mode":"insert-if-new","k":%s}',
                              table.concat(items, ","), k)
   return wrk.format("POST", "/v1/documents", headers, body)
end
