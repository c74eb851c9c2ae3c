/* conflux: topology-aware collective communication for host memory.
 *
 * The C API is NCCL-shaped: a communicator per group of ranks, collectives
 * that take element counts, results as cfxResult_t values. No function here
 * throws or aborts the process; failures return a code and
 * cfxGetLastError(comm) says what failed (rank, peer, call, sequence).
 */
#ifndef CONFLUX_CONFLUX_H
#define CONFLUX_CONFLUX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CFX_MAJOR 0
#define CFX_MINOR 1
#define CFX_PATCH 0
/* Same encoding as NCCL_VERSION_CODE: major*10000 + minor*100 + patch. */
#define CFX_VERSION_CODE (CFX_MAJOR * 10000 + CFX_MINOR * 100 + CFX_PATCH)

/* Colour that excludes a rank from cfxCommSplit (it gets a NULL comm). */
#define CFX_SPLIT_NOCOLOR (-1)

typedef struct cfxComm* cfxComm_t;
typedef struct cfxRequest* cfxRequest_t;

#define CFX_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CFX_UNIQUE_ID_BYTES];
} cfxUniqueId;

typedef enum {
  cfxSuccess = 0,
  cfxSystemError = 1,      /* an OS call failed (socket, mmap, ...) */
  cfxInternalError = 2,    /* a bug in conflux */
  cfxInvalidArgument = 3,  /* a bad value passed to the call */
  cfxInvalidUsage = 4,     /* a valid value used wrongly (mismatched calls, state) */
  cfxRemoteError = 5,      /* a peer failed, died or sent something wrong */
  cfxTimeout = 6,          /* a deadline passed */
  cfxInProgress = 7,       /* a nonblocking operation has not finished yet */
  cfxAborted = 8,          /* the communicator was aborted */
  cfxNumResults = 9,
  cfxResultMaxEnum = 0x7fffffff  /* keeps the type int-sized, so any int value is representable */
} cfxResult_t;

typedef enum {
  cfxInt8 = 0,
  cfxChar = 0,
  cfxUint8 = 1,
  cfxInt32 = 2,
  cfxInt = 2,
  cfxUint32 = 3,
  cfxInt64 = 4,
  cfxUint64 = 5,
  cfxFloat16 = 6,
  cfxHalf = 6,
  cfxFloat32 = 7,
  cfxFloat = 7,
  cfxFloat64 = 8,
  cfxDouble = 8,
  cfxBfloat16 = 9,
  cfxNumTypes = 10,
  cfxDataTypeMaxEnum = 0x7fffffff  /* bad values from callers are then checkable, not UB */
} cfxDataType_t;

typedef enum {
  cfxSum = 0,
  cfxProd = 1,
  cfxMax = 2,
  cfxMin = 3,
  cfxAvg = 4,
  cfxNumOps = 5,
  cfxRedOpMaxEnum = 0x7fffffff
} cfxRedOp_t;

/* ---- library and communicators ---------------------------------------- */
cfxResult_t cfxGetVersion(int* version);
cfxResult_t cfxGetUniqueId(cfxUniqueId* id);
cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId id, int rank);
/* Reads the launcher's environment: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra
 * (PMI_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID).
 * The rendezvous is CONFLUX_ROOT=host:port, else MASTER_ADDR:MASTER_PORT. */
cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm);
cfxResult_t cfxCommSplit(cfxComm_t comm, int color, int key, cfxComm_t* newcomm);
cfxResult_t cfxCommDestroy(cfxComm_t comm);
cfxResult_t cfxCommAbort(cfxComm_t comm);
cfxResult_t cfxCommCount(const cfxComm_t comm, int* count);
cfxResult_t cfxCommUserRank(const cfxComm_t comm, int* rank);
/* The first error the communicator hit outside a call's own return value
 * (an asynchronous operation's failure, a dead peer): cfxSuccess if none. */
cfxResult_t cfxCommGetAsyncError(cfxComm_t comm, cfxResult_t* asyncError);
/* Per-communicator deadline for each operation, in milliseconds (0 = none).
 * The default comes from CONFLUX_TIMEOUT (seconds). */
cfxResult_t cfxCommSetTimeout(cfxComm_t comm, int64_t timeout_ms);

/* Memory that ranks on one host share without a copy (as ncclMemAlloc):
 * collectives whose buffers lie in it read the peers' data with plain loads
 * instead of process_vm_readv, and reduce straight from it. Page-granular;
 * ordinary buffers keep working everywhere. cfxMemFree(NULL) is a no-op. */
cfxResult_t cfxMemAlloc(void** ptr, size_t size);
cfxResult_t cfxMemFree(void* ptr);

/* Registers cfxMemAlloc memory with a communicator (as ncclCommRegister).
 * A call whose send and receive buffers both lie in registered memory is
 * known to use mapped buffers on every rank, so the tuner may choose the
 * single-copy algorithms that reduce straight from the peers' memory. As
 * with NCCL, a call must use registered buffers on every rank or on none:
 * a mix is reported as a mismatch on every rank. Registration is local
 * (not collective). Errors: memory not from cfxMemAlloc, a range that
 * overlaps one already registered (cfxInvalidUsage); deregistering a
 * handle that an operation not yet complete uses (cfxInvalidUsage), or one
 * this communicator did not give (cfxInvalidArgument). */
cfxResult_t cfxCommRegister(const cfxComm_t comm, void* buff, size_t size, void** handle);
cfxResult_t cfxCommDeregister(const cfxComm_t comm, void* handle);

const char* cfxGetErrorString(cfxResult_t result);
/* Human-readable detail of the last failure on this communicator (or of the
 * calling thread's last failure when comm is NULL). Never NULL. */
const char* cfxGetLastError(cfxComm_t comm);

/* ---- collectives ------------------------------------------------------- */
cfxResult_t cfxAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                         cfxDataType_t datatype, cfxRedOp_t op, cfxComm_t comm);
cfxResult_t cfxBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                         cfxDataType_t datatype, int root, cfxComm_t comm);
cfxResult_t cfxReduce(const void* sendbuff, void* recvbuff, size_t count,
                      cfxDataType_t datatype, cfxRedOp_t op, int root, cfxComm_t comm);
cfxResult_t cfxAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                         cfxDataType_t datatype, cfxComm_t comm);
cfxResult_t cfxReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             cfxDataType_t datatype, cfxRedOp_t op, cfxComm_t comm);
cfxResult_t cfxAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                        cfxDataType_t datatype, cfxComm_t comm);
cfxResult_t cfxAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                         void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                         cfxDataType_t datatype, cfxComm_t comm);
/* Counts travel with the data: recvcounts[p] and rdispls[p] (elements) are outputs. An overflow of
   recvcapacity is cfxInvalidUsage on every rank, naming the sender, with nothing written past it.
   Received blocks are packed in rank order (rdispls[0] = 0). Inside the call every rank learns the
   whole traffic matrix (a small gather of every rank's counts), so only pairs with something to move
   exchange messages, and every rank sees any receiver's overflow before data moves. */
cfxResult_t cfxAlltoAllvDynamic(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                void* recvbuff, size_t recvcapacity, size_t recvcounts[], size_t rdispls[],
                                cfxDataType_t datatype, cfxComm_t comm);
cfxResult_t cfxGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                      cfxDataType_t datatype, int root, cfxComm_t comm);
cfxResult_t cfxScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                       cfxDataType_t datatype, int root, cfxComm_t comm);
cfxResult_t cfxSend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer,
                    cfxComm_t comm);
cfxResult_t cfxRecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer,
                    cfxComm_t comm);
cfxResult_t cfxBarrier(cfxComm_t comm);

/* Operations between GroupStart and GroupEnd are issued together at
 * GroupEnd (per communicator, in call order), as in NCCL: a ring of
 * Send/Recv pairs inside a group does not deadlock. Groups nest. */
cfxResult_t cfxGroupStart(void);
cfxResult_t cfxGroupEnd(void);

/* ---- nonblocking forms ------------------------------------------------- *
 * Each returns at once with a request; the operation runs in the
 * communicator's progress thread, in issue order with every other operation
 * on that communicator. Buffers must stay valid until the request completes.
 * cfxTest sets *done and returns the operation's result once done (or
 * cfxSuccess while it runs); cfxWait blocks until done. A request is freed
 * by cfxRequestFree (after completion, or it waits first). */
cfxResult_t cfxIallReduce(const void* sendbuff, void* recvbuff, size_t count,
                          cfxDataType_t datatype, cfxRedOp_t op, cfxComm_t comm,
                          cfxRequest_t* request);
cfxResult_t cfxIbroadcast(const void* sendbuff, void* recvbuff, size_t count,
                          cfxDataType_t datatype, int root, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIreduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                       cfxRedOp_t op, int root, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIallGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                          cfxDataType_t datatype, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                              cfxDataType_t datatype, cfxRedOp_t op, cfxComm_t comm,
                              cfxRequest_t* request);
cfxResult_t cfxIalltoAll(const void* sendbuff, void* recvbuff, size_t count,
                         cfxDataType_t datatype, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIalltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                          void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                          cfxDataType_t datatype, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIalltoAllvDynamic(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                 void* recvbuff, size_t recvcapacity, size_t recvcounts[], size_t rdispls[],
                                 cfxDataType_t datatype, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                       cfxDataType_t datatype, int root, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIscatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                        cfxDataType_t datatype, int root, cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIsend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer,
                     cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIrecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer,
                     cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxIbarrier(cfxComm_t comm, cfxRequest_t* request);
cfxResult_t cfxTest(cfxRequest_t request, int* done);
cfxResult_t cfxWait(cfxRequest_t request);
cfxResult_t cfxRequestFree(cfxRequest_t request);

/* ---- Mixture-of-Experts dispatch and combine --------------------------- *
 * A MoE layer object: tokens go to the ranks that hold their top-k experts
 * (dispatch) and the experts' outputs come back weighted, in token order
 * (combine). Counts are found inside each call (cfxAlltoAllvDynamic), a
 * token travels once to each destination rank however many of its experts
 * live there, and the routing is kept in a handle: combine, the backward
 * pass and a replay with the same routing reuse it. */
typedef struct cfxMoe* cfxMoe_t;
typedef struct cfxMoeHandle* cfxMoeHandle_t;
typedef struct {
  size_t size;                /* sizeof(cfxMoeConfig_t): lets the struct grow */
  int num_experts, top_k;
  size_t hidden;              /* elements per token */
  cfxDataType_t datatype;     /* at least cfxFloat32 and cfxBfloat16 */
  size_t max_tokens_per_rank;
  const int* expert_to_rank;  /* NULL: blocked, expert e on rank e / (num_experts / nranks) */
  double capacity_factor;     /* 0: dropless */
  /* Fields below may be left 0 (a caller compiled against an older header
     passes a smaller size). */
  size_t expert_alignment;    /* rows: each expert's block starts at a multiple of it (0 or 1: packed) */
  int64_t timeout_ms;         /* per dispatch/combine (0: the communicator's) */
  /* cfxMoeCombine on a communicator that spans hosts. 0: every (token,
     expert) row crosses back and the token's rank adds them in j order, as
     specified below. 1: each expert host adds its experts' weighted rows for
     a token first (in float, in j order) and only that partial sum crosses
     the network, as float; the token's rank adds the partials in host order:
     fewer bytes where a token has several experts on one host, the same
     terms grouped by host (float rounding may differ from the j-order sum).
     2: as 1 with each partial rounded to the datatype on the way (half the
     bytes of 1 for 16-bit types; one more rounding per host, as DeepEP's
     internode combine). cfxMoeCombineWeighted and cfxMoeGatherRows always
     return the rows. */
  int host_partial_sums;
} cfxMoeConfig_t;
cfxResult_t cfxMoeCreate(cfxMoe_t* moe, const cfxMoeConfig_t* config, cfxComm_t comm);   /* collective */
/* expert_tokens: this rank's experts in ascending id, each a packed block of tokens_per_expert[i] rows;
   inside a block, rows in order of (source rank, token index on the source). */
cfxResult_t cfxMoeDispatch(cfxMoe_t moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                           const float* topk_weights, void* expert_tokens, size_t expert_capacity_rows,
                           size_t tokens_per_expert[], cfxMoeHandle_t* handle);
/* tokens_out[t] = sum over j = 0..top_k-1, in that order, of topk_weights[t*top_k+j] times the row that
   expert topk_idx[t*top_k+j] produced for token t, accumulated in float (bf16: rounded once at the end;
   a fused multiply-add may differ in the last bit). */
cfxResult_t cfxMoeCombine(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, void* tokens_out);
cfxResult_t cfxMoeHandleFree(cfxMoeHandle_t handle);
cfxResult_t cfxMoeDestroy(cfxMoe_t moe);  /* free its handles first */
/* This rank's experts (ascending ids) and where each block starts in
   expert_tokens, in rows (after alignment). experts[] has room for
   num_experts; *count is set to how many this rank holds. */
cfxResult_t cfxMoeLocalExperts(cfxMoe_t moe, int experts[], int* count);
cfxResult_t cfxMoeBlockOffsets(cfxMoeHandle_t handle, size_t offsets[]);
/* With expert_tokens NULL, cfxMoeDispatch keeps the rows in a buffer of its
   own, sized to what arrived (expert_capacity_rows is then not a limit);
   this gives it and its rows. It lives as long as the handle. That buffer is
   shared memory (as cfxMemAlloc's): on one host, peers write dispatch's rows
   into it and, when it is also expert_out, read combine's rows from it
   through a mapping instead of through the kernel. A caller's buffer from
   cfxMemAlloc gets the same; one from the heap is reached through
   process_vm_writev/readv (measured 1.45x slower per round trip on 4 ranks).
   The layer reserves that buffer's address space once for the most rows the
   rank can receive (max_tokens_per_rank, top_k, capacity), so it never moves
   as routings change; memory is committed only for the rows written. */
cfxResult_t cfxMoeExpertTokens(cfxMoeHandle_t handle, void** expert_tokens, size_t* rows);
/* What the handle's calls moved: bytes this rank sent to other ranks, bytes
   it received, and the receive memory the library allocated for them (each
   buffer sized to what arrived, not to the worst case). */
cfxResult_t cfxMoeStats(cfxMoeHandle_t handle, size_t* wire_bytes, size_t* received_bytes, size_t* committed_bytes);
/* Of the handle's wire bytes, those this rank sent to ranks on other hosts
   (ranks that share no memory with it): what crossed the network. */
cfxResult_t cfxMoeNetworkBytes(cfxMoeHandle_t handle, size_t* network_bytes);
/* Token-expert pairs the capacity policy dropped in this dispatch (their
   combine contribution is zero); 0 when dropless. */
cfxResult_t cfxMoeDropped(cfxMoeHandle_t handle, size_t* dropped);
/* The same routing again with new rows (a replay, or the backward of
   combine): tokens go where the handle's dispatch sent them. With
   scale_by_weights, each expert row is multiplied by its token's weight
   for that expert (the gradient of combine with respect to expert_out). */
cfxResult_t cfxMoeDispatchReplay(cfxMoe_t moe, cfxMoeHandle_t handle, const void* tokens, void* expert_tokens,
                                 int scale_by_weights);
/* Combine with other weights: weights[t*top_k+j], or NULL for all 1 (the
   backward of dispatch: each token's gradient is the sum of its rows'). */
cfxResult_t cfxMoeCombineWeighted(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, const float* weights,
                                  void* tokens_out);
/* Each token's rows back unreduced: rows_out[(t*top_k+j)*hidden ...] is the
   row expert topk_idx[t*top_k+j] produced for token t (zero if dropped);
   for the gradient of combine with respect to the weights. */
cfxResult_t cfxMoeGatherRows(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, void* rows_out);

/* ---- utilities --------------------------------------------------------- */
/* Size in bytes of one element of datatype (0 for an invalid type). */
size_t cfxTypeSize(cfxDataType_t datatype);

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_CONFLUX_H */
