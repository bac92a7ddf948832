//! Every UCX (UCP) type and field the DLL reads, named once, resolved per
//! image from the debugger's type information; and the few facts DWARF
//! does not carry (the expected hash's size, the descriptor flags), each
//! stated once with where it comes from.
//!
//! Fields inside UCX's untagged structs are asked for by path
//! (`recv.tag.sn`), as C names them: no type name reaches those structs.

use crate::access::ImageAccess;
use crate::types::{ty, Missing};

/// Type and field names, as UCX's sources spell them.
pub mod names {
    pub const WORKER: &str = "ucp_worker_t";
    pub const WORKER_TM: &str = "tm";
    pub const TAG_MATCH: &str = "ucp_tag_match_t";
    pub const TM_WILDCARD: &str = "expected.wildcard";
    pub const TM_HASH: &str = "expected.hash";
    pub const TM_COUNT: &str = "expected.sw_all_count";
    pub const TM_UNEXPECTED: &str = "unexpected.all";
    pub const REQUEST_QUEUE: &str = "ucp_request_queue_t";
    pub const RQ_QUEUE: &str = "queue";
    pub const RQ_COUNT: &str = "sw_count";
    pub const QUEUE_HEAD: &str = "ucs_queue_head_t";
    pub const QH_HEAD: &str = "head";
    pub const QH_PTAIL: &str = "ptail";
    pub const QUEUE_ELEM: &str = "ucs_queue_elem_t";
    pub const QE_NEXT: &str = "next";
    pub const LIST: &str = "ucs_list_link_t";
    pub const LIST_NEXT: &str = "next";
    pub const REQUEST: &str = "ucp_request_t";
    pub const REQ_QUEUE: &str = "recv.queue";
    pub const REQ_BUFFER: &str = "recv.buffer";
    pub const REQ_LENGTH: &str = "recv.length";
    pub const REQ_TAG: &str = "recv.tag.tag";
    pub const REQ_MASK: &str = "recv.tag.tag_mask";
    pub const REQ_SN: &str = "recv.tag.sn";
    pub const RDESC: &str = "ucp_recv_desc_t";
    pub const RD_TAG_LIST: &str = "tag_list";
    pub const RD_LENGTH: &str = "length";
    pub const RD_PAYLOAD: &str = "payload_offset";
    pub const RD_FLAGS: &str = "flags";
    pub const EAGER_FIRST: &str = "ucp_eager_first_hdr_t";
    pub const EF_TOTAL: &str = "total_len";
    pub const RTS: &str = "ucp_rndv_rts_hdr_t";
    pub const RTS_SIZE: &str = "size";
    /// `void ucp_get_version(unsigned *, unsigned *, unsigned *)`.
    pub const FN_VERSION: &str = "ucp_get_version";
    /// The worker's request memory pool, where every UCP request lives
    /// (`ucp_worker_t.req_mp`, a `ucs_mpool_t`).
    pub const WORKER_REQ_MP: &str = "req_mp";
    pub const WORKER_CONTEXT: &str = "context";
    pub const CONTEXT: &str = "ucp_context_t";
    /// `UCX_PROTO_ENABLE`: the new protocols, which mark no tag send.
    pub const CTX_PROTO_ENABLE: &str = "config.ext.proto_enable";
    pub const MPOOL: &str = "ucs_mpool_t";
    pub const MP_DATA: &str = "data";
    pub const MPOOL_DATA: &str = "ucs_mpool_data_t";
    pub const MPD_ELEM_SIZE: &str = "elem_size";
    pub const MPD_ALIGNMENT: &str = "alignment";
    pub const MPD_CHUNKS: &str = "chunks";
    pub const MPOOL_CHUNK: &str = "ucs_mpool_chunk_t";
    pub const MPC_NEXT: &str = "next";
    pub const MPC_ELEMS: &str = "elems";
    pub const MPC_NUM_ELEMS: &str = "num_elems";
    /// The header before each element: the next free element while free,
    /// the pool while in use.
    pub const MPOOL_ELEM: &str = "ucs_mpool_elem_t";
    pub const REQ_FLAGS: &str = "flags";
    pub const REQ_SEND_EP: &str = "send.ep";
    pub const REQ_SEND_BUFFER: &str = "send.buffer";
    pub const REQ_SEND_LENGTH: &str = "send.length";
    pub const REQ_SEND_TAG: &str = "send.msg_proto.tag";
    pub const REQ_SEND_CB: &str = "send.cb";
}

/// `ucs_roundup_pow2(UCP_TAG_MATCH_HASH_SIZE)`, UCP_TAG_MATCH_HASH_SIZE
/// being 1021 (`ucp/tag/tag_match.inl`, `tag_match.c`): the expected and
/// unexpected hashes are malloc'ed arrays of this many buckets, a size no
/// type records. The walk checks it: the buckets' counts must add up to
/// the worker's own count of expected requests.
pub const HASH_BUCKETS: u64 = 1024;

/// `ucp_recv_desc_t.flags` bits (`enum ucp_recv_desc_flags` in
/// `ucp/core/ucp_request.h`; enumerators are not in reach of a DLL). The
/// same from UCX 1.8 on ([`super::OLDEST_SUPPORTED`]).
pub mod rdesc_flags {
    pub const EAGER: u64 = 1 << 1;
    pub const EAGER_ONLY: u64 = 1 << 2;
    pub const EAGER_SYNC: u64 = 1 << 3;
    pub const RNDV: u64 = 1 << 6;
}

/// `ucp_request_t.flags` bits (the anonymous enum in
/// `ucp/core/ucp_request.h`; enumerators are not in reach of a DLL). The
/// same from UCX 1.8 on ([`super::OLDEST_SUPPORTED`]).
pub mod request_flags {
    pub const COMPLETED: u64 = 1 << 0;
    /// Its owner freed it before it completed (`ucp_request_free`).
    pub const RELEASED: u64 = 1 << 1;
    /// Synchronous: it completes when the receiver has matched it.
    pub const SYNC: u64 = 1 << 8;
    /// A tag send (`ucp_tag_send_req_init`, the only place that sets it).
    pub const SEND_TAG: u64 = 1 << 14;
}

/// Widths of scalars DWARF gives offsets of only: `uint32_t flags`,
/// `unsigned num_elems`, `int proto_enable`.
pub const REQ_FLAGS_BYTES: u8 = 4;
pub const MPC_NUM_ELEMS_BYTES: u8 = 4;
pub const PROTO_ENABLE_BYTES: u8 = 4;

/// Which of a descriptor's two list links is on the list of all
/// unexpected descriptors (`UCP_RDESC_ALL_LIST`).
pub const RDESC_ALL_LIST: u64 = 1;

/// Widths of the descriptor's scalar fields (`uint32_t length`, `uint32_t
/// payload_offset`, `uint16_t flags`): DWARF gives a DLL offsets only.
pub const RD_LENGTH_BYTES: u8 = 4;
pub const RD_PAYLOAD_BYTES: u8 = 4;
pub const RD_FLAGS_BYTES: u8 = 2;

/// Where everything lies, for one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcxLayout {
    /// `ucp_worker_t.tm` (a `ucp_tag_match_t`).
    pub worker_tm: u64,
    /// Offsets within `ucp_tag_match_t`.
    pub tm_wildcard: u64,
    pub tm_hash: u64,
    pub tm_count: u64,
    pub tm_unexpected: u64,
    /// `ucp_request_queue_t`: its queue head, count and size.
    pub rq_queue: u64,
    pub rq_count: u64,
    pub rq_size: u64,
    /// `ucs_queue_head_t` and `ucs_queue_elem_t`.
    pub qh_head: u64,
    pub qh_ptail: u64,
    pub qe_next: u64,
    /// `ucs_list_link_t`.
    pub list_next: u64,
    pub list_size: u64,
    /// `ucp_request_t`, the receive side.
    pub req_size: u64,
    pub req_queue: u64,
    pub req_buffer: u64,
    pub req_length: u64,
    pub req_tag: u64,
    pub req_mask: u64,
    pub req_sn: u64,
    /// `ucp_recv_desc_t`.
    pub rd_size: u64,
    pub rd_tag_list: u64,
    pub rd_length: u64,
    pub rd_payload: u64,
    pub rd_flags: u64,
    /// The payload headers behind a descriptor: an eager first fragment's
    /// total length, a rendezvous RTS's size.
    pub ef_total: u64,
    pub rts_size: u64,
}

/// Where the request pool and a send request's fields lie, for one image:
/// apart from [`UcxLayout`], so that a UCX whose sends cannot be read
/// still has its receives read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendLayout {
    /// `ucp_worker_t.req_mp`.
    pub worker_req_mp: u64,
    /// `ucp_worker_t.context` and `ucp_context_t.config.ext.proto_enable`,
    /// if the types have them.
    pub proto_enable: Option<(u64, u64)>,
    /// `ucs_mpool_t.data`.
    pub mp_data: u64,
    /// `ucs_mpool_data_t`: element size, alignment, chunk list; and the
    /// struct's size.
    pub mpd_elem_size: u64,
    pub mpd_alignment: u64,
    pub mpd_chunks: u64,
    pub mpd_size: u64,
    /// `ucs_mpool_chunk_t`.
    pub mpc_next: u64,
    pub mpc_elems: u64,
    pub mpc_num_elems: u64,
    pub mpc_size: u64,
    /// `sizeof(ucs_mpool_elem_t)`: the header before each element.
    pub elem_header: u64,
    /// `ucp_request_t`: its size, flags and send fields.
    pub req_size: u64,
    pub req_flags: u64,
    pub send_ep: u64,
    pub send_buffer: u64,
    pub send_length: u64,
    pub send_tag: u64,
    pub send_cb: u64,
}

impl SendLayout {
    /// Resolves the layout, or names the first type or field missing.
    pub fn resolve<I: ImageAccess>(image: &I) -> Result<SendLayout, Missing> {
        use names::*;
        let worker = ty(image, WORKER)?;
        let mp = ty(image, MPOOL)?;
        let data = ty(image, MPOOL_DATA)?;
        let chunk = ty(image, MPOOL_CHUNK)?;
        let elem = ty(image, MPOOL_ELEM)?;
        let req = ty(image, REQUEST)?;
        let proto_enable = worker.opt(WORKER_CONTEXT).zip(
            ty(image, CONTEXT)
                .ok()
                .and_then(|c| c.opt(CTX_PROTO_ENABLE)),
        );
        Ok(SendLayout {
            worker_req_mp: worker.field(WORKER_REQ_MP)?,
            proto_enable,
            mp_data: mp.field(MP_DATA)?,
            mpd_elem_size: data.field(MPD_ELEM_SIZE)?,
            mpd_alignment: data.field(MPD_ALIGNMENT)?,
            mpd_chunks: data.field(MPD_CHUNKS)?,
            mpd_size: data.size()?,
            mpc_next: chunk.field(MPC_NEXT)?,
            mpc_elems: chunk.field(MPC_ELEMS)?,
            mpc_num_elems: chunk.field(MPC_NUM_ELEMS)?,
            mpc_size: chunk.size()?,
            elem_header: elem.size()?,
            req_size: req.size()?,
            req_flags: req.field(REQ_FLAGS)?,
            send_ep: req.field(REQ_SEND_EP)?,
            send_buffer: req.field(REQ_SEND_BUFFER)?,
            send_length: req.field(REQ_SEND_LENGTH)?,
            send_tag: req.field(REQ_SEND_TAG)?,
            send_cb: req.field(REQ_SEND_CB)?,
        })
    }
}

impl UcxLayout {
    /// Resolves the layout, or names the first type or field missing.
    pub fn resolve<I: ImageAccess>(image: &I) -> Result<UcxLayout, Missing> {
        use names::*;
        let worker = ty(image, WORKER)?;
        let tm = ty(image, TAG_MATCH)?;
        let rq = ty(image, REQUEST_QUEUE)?;
        let qh = ty(image, QUEUE_HEAD)?;
        let qe = ty(image, QUEUE_ELEM)?;
        let list = ty(image, LIST)?;
        let req = ty(image, REQUEST)?;
        let rd = ty(image, RDESC)?;
        let ef = ty(image, EAGER_FIRST)?;
        let rts = ty(image, RTS)?;
        Ok(UcxLayout {
            worker_tm: worker.field(WORKER_TM)?,
            tm_wildcard: tm.field(TM_WILDCARD)?,
            tm_hash: tm.field(TM_HASH)?,
            tm_count: tm.field(TM_COUNT)?,
            tm_unexpected: tm.field(TM_UNEXPECTED)?,
            rq_queue: rq.field(RQ_QUEUE)?,
            rq_count: rq.field(RQ_COUNT)?,
            rq_size: rq.size()?,
            qh_head: qh.field(QH_HEAD)?,
            qh_ptail: qh.field(QH_PTAIL)?,
            qe_next: qe.field(QE_NEXT)?,
            list_next: list.field(LIST_NEXT)?,
            list_size: list.size()?,
            req_size: req.size()?,
            req_queue: req.field(REQ_QUEUE)?,
            req_buffer: req.field(REQ_BUFFER)?,
            req_length: req.field(REQ_LENGTH)?,
            req_tag: req.field(REQ_TAG)?,
            req_mask: req.field(REQ_MASK)?,
            req_sn: req.field(REQ_SN)?,
            rd_size: rd.size()?,
            rd_tag_list: rd.field(RD_TAG_LIST)?,
            rd_length: rd.field(RD_LENGTH)?,
            rd_payload: rd.field(RD_PAYLOAD)?,
            rd_flags: rd.field(RD_FLAGS)?,
            ef_total: ef.field(EF_TOTAL)?,
            rts_size: rts.field(RTS_SIZE)?,
        })
    }

    /// Bytes of a request to read: all of it (the queue link included).
    pub fn request_read(&self) -> u64 {
        self.req_size
    }

    /// Bytes of a descriptor and the payload header behind it to read.
    pub fn descriptor_read(&self) -> u64 {
        // The tag is the header's first 8 bytes; the lengths end at the
        // furthest of the two headers' fields.
        self.rd_size + (self.ef_total.max(self.rts_size) + 8).max(8)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::FakeImage;

    /// A layout shaped like UCX 1.13.1's on x86-64 (the nesting and the
    /// order of fields are its; the offsets are made up, consistent).
    pub(crate) fn image() -> FakeImage {
        use names::*;
        let mut i = FakeImage::new();
        i.add_type(WORKER, 0x1000, &[(WORKER_TM, 0x300)]);
        i.add_type(
            TAG_MATCH,
            0x100,
            &[
                (TM_WILDCARD, 0),
                (TM_HASH, 24),
                (TM_COUNT, 40),
                (TM_UNEXPECTED, 48),
            ],
        );
        i.add_type(REQUEST_QUEUE, 24, &[(RQ_QUEUE, 0), (RQ_COUNT, 16)]);
        i.add_type(QUEUE_HEAD, 16, &[(QH_HEAD, 0), (QH_PTAIL, 8)]);
        i.add_type(QUEUE_ELEM, 8, &[(QE_NEXT, 0)]);
        i.add_type(LIST, 16, &[("prev", 0), (LIST_NEXT, 8)]);
        i.add_type(
            REQUEST,
            200,
            &[
                (REQ_QUEUE, 48),
                (REQ_BUFFER, 56),
                (REQ_LENGTH, 72),
                (REQ_TAG, 120),
                (REQ_MASK, 128),
                (REQ_SN, 136),
            ],
        );
        i.add_type(
            RDESC,
            48,
            &[
                (RD_TAG_LIST, 0),
                (RD_LENGTH, 32),
                (RD_PAYLOAD, 36),
                (RD_FLAGS, 40),
            ],
        );
        i.add_type(EAGER_FIRST, 24, &[(EF_TOTAL, 8)]);
        i.add_type(RTS, 41, &[("hdr", 0), (RTS_SIZE, 32)]);
        i
    }

    /// [`image`] with the request pool's types and a request's send
    /// fields (UCX 1.13.1's names; offsets made up, consistent).
    pub(crate) fn send_image() -> FakeImage {
        use names::*;
        let mut i = image();
        let worker = i.fields_of(WORKER).unwrap();
        worker.insert(WORKER_REQ_MP.to_string(), 0x88);
        worker.insert(WORKER_CONTEXT.to_string(), 0x68);
        let req = i.fields_of(REQUEST).unwrap();
        for (f, o) in [
            (REQ_FLAGS, 4),
            (REQ_SEND_EP, 24),
            (REQ_SEND_BUFFER, 32),
            (REQ_SEND_LENGTH, 48),
            (REQ_SEND_CB, 56),
            (REQ_SEND_TAG, 112),
        ] {
            req.insert(f.to_string(), o);
        }
        i.add_type(CONTEXT, 0x400, &[(CTX_PROTO_ENABLE, 0x288)]);
        i.add_type(MPOOL, 16, &[("freelist", 0), (MP_DATA, 8)]);
        i.add_type(
            MPOOL_DATA,
            64,
            &[
                (MPD_ELEM_SIZE, 0),
                (MPD_ALIGNMENT, 8),
                ("align_offset", 16),
                (MPD_CHUNKS, 40),
            ],
        );
        i.add_type(
            MPOOL_CHUNK,
            24,
            &[(MPC_NEXT, 0), (MPC_ELEMS, 8), (MPC_NUM_ELEMS, 16)],
        );
        i.add_type(MPOOL_ELEM, 8, &[]);
        i
    }

    #[test]
    fn every_send_type_and_field_is_named_when_missing() {
        use names::*;
        let base = send_image();
        let l = SendLayout::resolve(&base).unwrap();
        assert_eq!(l.proto_enable, Some((0x68, 0x288)));
        assert_eq!((l.elem_header, l.req_size), (8, 200));
        for name in [WORKER, MPOOL, MPOOL_DATA, MPOOL_CHUNK, MPOOL_ELEM, REQUEST] {
            let mut i = base.clone();
            i.remove_type(name);
            assert_eq!(SendLayout::resolve(&i), Err(Missing::Type(name)));
        }
        for (name, field) in [
            (WORKER, WORKER_REQ_MP),
            (MPOOL, MP_DATA),
            (MPOOL_DATA, MPD_ELEM_SIZE),
            (MPOOL_DATA, MPD_ALIGNMENT),
            (MPOOL_DATA, MPD_CHUNKS),
            (MPOOL_CHUNK, MPC_NEXT),
            (MPOOL_CHUNK, MPC_ELEMS),
            (MPOOL_CHUNK, MPC_NUM_ELEMS),
            (REQUEST, REQ_FLAGS),
            (REQUEST, REQ_SEND_EP),
            (REQUEST, REQ_SEND_BUFFER),
            (REQUEST, REQ_SEND_LENGTH),
            (REQUEST, REQ_SEND_TAG),
            (REQUEST, REQ_SEND_CB),
        ] {
            let mut i = base.clone();
            assert!(i.remove_field(name, field));
            assert_eq!(SendLayout::resolve(&i), Err(Missing::Field(name, field)));
        }
        // The new protocols' switch is optional.
        let mut i = base.clone();
        i.remove_type(CONTEXT);
        assert_eq!(SendLayout::resolve(&i).unwrap().proto_enable, None);
        // The receive side needs none of it.
        assert!(UcxLayout::resolve(&image()).is_ok());
        assert!(SendLayout::resolve(&image()).is_err());
    }

    #[test]
    fn every_type_and_field_is_named_when_missing() {
        assert!(UcxLayout::resolve(&image()).is_ok());
        let base = image();
        for (name, _, fields) in &base.types {
            let mut i = base.clone();
            i.remove_type(name);
            let missing = UcxLayout::resolve(&i).unwrap_err();
            assert!(
                matches!(missing, Missing::Type(t) if t == name),
                "{missing}"
            );
            for field in fields.keys().filter(|f| *f != "prev" && *f != "hdr") {
                let mut i = base.clone();
                assert!(i.remove_field(name, field));
                let missing = UcxLayout::resolve(&i).unwrap_err();
                assert_eq!(missing.to_string(), format!("field {field} of {name}"));
            }
        }
    }
}
